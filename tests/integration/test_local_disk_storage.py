"""The local-disk storage adapter: signatures, limits, atomic writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from adapters.storage.local_disk import LocalDiskStorage, load_or_create_secret
from domain.errors import Forbidden, Invalid, NotFound, PayloadTooLarge

NOW = datetime(2026, 5, 1, tzinfo=UTC)
KEY = "orgs/org_a/files/f1/a.txt"


@pytest.fixture
def storage(tmp_path):
    return LocalDiskStorage(tmp_path / "objects", "http://x", load_or_create_secret(tmp_path / "k"))


def params(url):
    from urllib.parse import parse_qs, urlsplit

    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    return {
        "content_type": query["ct"],
        "max_size": query["max"],
        "expires": query["exp"],
        "signature": query["sig"],
    }


async def chunks(*parts):
    for part in parts:
        yield part


async def test_secret_is_created_once(tmp_path):
    assert load_or_create_secret(tmp_path / "s") == load_or_create_secret(tmp_path / "s")
    assert (tmp_path / "s").stat().st_mode & 0o777 == 0o600


async def test_signed_upload_round_trip(storage):
    signed = await storage.sign_upload(
        KEY, content_type="text/plain", max_size=10, expires_at=NOW + timedelta(minutes=5)
    )
    assert signed.url.startswith("http://x/storage/orgs/org_a/files/f1/a.txt?")
    limit = storage.check_signature(
        KEY, sent_content_type="text/plain", now=NOW, **params(signed.url)
    )
    stored = await storage.receive(KEY, chunks(b"hello", b" you"), max_size=limit, declared=9)
    assert (stored.size, await storage.get(KEY)) == (9, b"hello you")
    assert await storage.exists(KEY)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"key": "orgs/org_a/files/f1/b.txt"}, "Invalid upload signature"),
        ({"max_size": "1000"}, "Invalid upload signature"),
        ({"content_type": "text/html"}, "Invalid upload signature"),
        ({"sent_content_type": "text/html"}, "Content-Type does not match"),
        ({"now": NOW + timedelta(minutes=6)}, "Upload URL has expired"),
        ({"signature": None}, "Missing upload signature"),
    ],
)
async def test_tampered_or_expired_uploads_are_refused(storage, change, message):
    signed = await storage.sign_upload(
        KEY, content_type="text/plain", max_size=10, expires_at=NOW + timedelta(minutes=5)
    )
    arguments = {"key": KEY, "sent_content_type": "text/plain", "now": NOW, **params(signed.url)}
    arguments.update(change)
    with pytest.raises(Forbidden, match=message):
        storage.check_signature(arguments.pop("key"), **arguments)


async def test_oversize_upload_stores_nothing(storage):
    await storage.put(KEY, b"old", content_type="text/plain")
    with pytest.raises(PayloadTooLarge):
        await storage.receive(KEY, chunks(b"12345", b"678"), max_size=6, declared=None)
    with pytest.raises(PayloadTooLarge):
        await storage.receive(KEY, chunks(b"1"), max_size=6, declared=7)
    assert await storage.get(KEY) == b"old"
    folder = storage._path("orgs/org_a/files/f1")
    assert [p.name for p in folder.iterdir()] == ["a.txt"]


async def test_keys_cannot_escape_the_root(storage):
    for key in ("../x", "/etc/passwd", "orgs/../../x", "a\\b"):
        with pytest.raises(Invalid):
            await storage.put(key, b"x", content_type="text/plain")


async def test_delete_prefix_and_missing_objects(storage):
    await storage.put(KEY, b"1", content_type="text/plain")
    await storage.put("orgs/org_a/files/f1/content.md", b"2", content_type="text/markdown")
    await storage.put("orgs/org_a/files/f2/b.txt", b"3", content_type="text/plain")
    assert await storage.delete_prefix("orgs/org_a/files/f1/") == 2
    assert await storage.delete_prefix("orgs/org_a/files/f9/") == 0
    with pytest.raises(NotFound):
        await storage.get(KEY)
    assert await storage.get("orgs/org_a/files/f2/b.txt") == b"3"
