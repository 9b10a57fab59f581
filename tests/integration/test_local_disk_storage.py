"""The local-disk storage adapter: signatures, limits, atomic writes, uploads used once,
signed downloads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from adapters.storage.local_disk import LocalDiskStorage, load_or_create_secret
from application.ports.object_storage import StoredObject
from domain.errors import Conflict, Forbidden, Invalid, NotFound, PayloadTooLarge

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
        "size": query["size"],
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
        KEY, content_type="text/plain", size=9, expires_at=NOW + timedelta(minutes=5)
    )
    assert signed.url.startswith("http://x/storage/orgs/org_a/files/f1/a.txt?")
    limit = storage.check_signature(
        KEY, sent_content_type="text/plain", now=NOW, **params(signed.url)
    )
    stored = await storage.receive(
        KEY, chunks(b"hello", b" you"), content_type="text/plain", size=limit, declared=9
    )
    assert (stored.size, await storage.get(KEY)) == (9, b"hello you")
    assert await storage.exists(KEY)
    assert await storage.stat(KEY) == StoredObject(size=9, content_type="text/plain")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"key": "orgs/org_a/files/f1/b.txt"}, "Invalid upload signature"),
        ({"size": "1000"}, "Invalid upload signature"),
        ({"content_type": "text/html"}, "Invalid upload signature"),
        ({"sent_content_type": "text/html"}, "Content-Type does not match"),
        ({"now": NOW + timedelta(minutes=6)}, "Upload URL has expired"),
        ({"signature": None}, "Missing upload signature"),
    ],
)
async def test_tampered_or_expired_uploads_are_refused(storage, change, message):
    signed = await storage.sign_upload(
        KEY, content_type="text/plain", size=9, expires_at=NOW + timedelta(minutes=5)
    )
    arguments = {"key": KEY, "sent_content_type": "text/plain", "now": NOW, **params(signed.url)}
    arguments.update(change)
    with pytest.raises(Forbidden, match=message):
        storage.check_signature(arguments.pop("key"), **arguments)


async def receive(storage, *parts, size=None, declared=None):
    size = sum(map(len, parts)) if size is None else size
    return await storage.receive(
        KEY, chunks(*parts), content_type="text/plain", size=size, declared=declared
    )


async def test_an_upload_of_another_size_stores_nothing_and_can_be_retried(storage):
    with pytest.raises(PayloadTooLarge):
        await receive(storage, b"12345", b"678", size=6)
    with pytest.raises(PayloadTooLarge):
        await receive(storage, b"1", size=6, declared=7)
    with pytest.raises(Invalid, match="exactly 6 bytes"):
        await receive(storage, b"12", b"3", size=6)
    with pytest.raises(Invalid, match="exactly 6 bytes"):
        await receive(storage, b"123456", size=6, declared=5)
    assert await storage.stat(KEY) is None
    folder = storage._path("orgs/org_a/files/f1")
    assert list(folder.iterdir()) == []
    assert (await receive(storage, b"123456", size=6)).size == 6


async def test_an_upload_is_used_once(storage):
    await receive(storage, b"first")
    with pytest.raises(Conflict, match="already been used"):
        await receive(storage, b"secnd")
    with pytest.raises(Conflict):
        await receive(storage, b"third", declared=5)
    assert await storage.get(KEY) == b"first"


async def test_an_object_stored_otherwise_is_not_replaced_by_an_upload(storage):
    await storage.put(KEY, b"old", content_type="text/plain")
    with pytest.raises(Conflict):
        await receive(storage, b"new")
    assert await storage.get(KEY) == b"old"
    assert await storage.stat(KEY) == StoredObject(size=3, content_type="text/plain")


async def test_a_racing_second_upload_is_refused_while_the_first_runs(storage):
    async def slow():
        yield b"12"
        with pytest.raises(Conflict):
            await receive(storage, b"34", size=4)
        yield b"56"

    stored = await storage.receive(KEY, slow(), content_type="text/plain", size=4, declared=None)
    assert (stored.size, await storage.get(KEY)) == (4, b"1256")


@pytest.mark.parametrize(
    "change",
    [
        {"size": "\u00b2"},
        {"size": "1\u0661"},
        {"size": "-1"},
        {"size": "1e3"},
        {"size": " 10"},
        {"expires": "\u00b2"},
        {"expires": "9" * 40},
        {"expires": "99999999999999"},
        {"signature": "\u00e9" * 64},
        {"signature": "zz"},
        {"signature": "A" * 64},
        {"content_type": "text/plain\ud800"},
    ],
)
async def test_malformed_signed_parameters_are_forbidden_never_an_error(storage, change):
    signed = await storage.sign_upload(
        KEY, content_type="text/plain", size=9, expires_at=NOW + timedelta(minutes=5)
    )
    arguments = {"sent_content_type": "text/plain", "now": NOW, **params(signed.url)}
    arguments.update(change)
    with pytest.raises(Forbidden):
        storage.check_signature(KEY, **arguments)


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


def download_params(url):
    from urllib.parse import parse_qs, urlsplit

    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    return {
        "expires": query.get("exp"),
        "file_name": query.get("fn"),
        "content_type": query.get("ct"),
        "signature": query.get("sig"),
    }


async def test_signed_download_round_trip(storage):
    await storage.put(KEY, b"hello", content_type="text/plain")
    url = await storage.sign_download(
        KEY, expires_at=NOW + timedelta(minutes=5), file_name="Ré port.txt", content_type="a/b"
    )
    assert url.startswith("http://x/storage/orgs/org_a/files/f1/a.txt?exp=")
    download = storage.check_download(KEY, now=NOW, **download_params(url))
    assert (download.file_name, download.content_type) == ("Ré port.txt", "a/b")
    assert download.path.read_bytes() == b"hello"
    plain = await storage.sign_download(KEY, expires_at=NOW + timedelta(minutes=5))
    download = storage.check_download(KEY, now=NOW, **download_params(plain))
    assert (download.file_name, download.content_type) == (None, "text/plain")


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"key": "orgs/org_a/files/f1/b.txt"}, Forbidden),
        ({"file_name": "other.txt"}, Forbidden),
        ({"content_type": "text/html"}, Forbidden),
        ({"expires": "99999999999"}, Forbidden),
        ({"expires": "\u00b2"}, Forbidden),
        ({"signature": None}, Forbidden),
        ({"signature": "\u00e9"}, Forbidden),
        ({"now": NOW + timedelta(minutes=6)}, Forbidden),
    ],
)
async def test_tampered_or_expired_downloads_are_refused(storage, change, error):
    await storage.put(KEY, b"hello", content_type="text/plain")
    url = await storage.sign_download(KEY, expires_at=NOW + timedelta(minutes=5), file_name="a.txt")
    arguments = {"key": KEY, "now": NOW, **download_params(url)}
    arguments.update(change)
    with pytest.raises(error):
        storage.check_download(arguments.pop("key"), **arguments)


async def test_an_upload_signature_is_no_download_signature_and_back(storage):
    signed = await storage.sign_upload(
        KEY, content_type="text/plain", size=9, expires_at=NOW + timedelta(minutes=5)
    )
    upload = params(signed.url)
    await storage.put(KEY, b"hello", content_type="text/plain")
    with pytest.raises(Forbidden):
        storage.check_download(
            KEY,
            expires=upload["expires"],
            file_name=None,
            content_type=upload["content_type"],
            signature=upload["signature"],
            now=NOW,
        )
    url = await storage.sign_download(KEY, expires_at=NOW + timedelta(minutes=5))
    download = download_params(url)
    with pytest.raises(Forbidden):
        storage.check_signature(
            KEY,
            content_type="text/plain",
            size="9",
            expires=download["expires"],
            signature=download["signature"],
            sent_content_type="text/plain",
            now=NOW,
        )


async def test_a_download_of_nothing_is_not_found(storage):
    url = await storage.sign_download(KEY, expires_at=NOW + timedelta(minutes=5))
    with pytest.raises(NotFound):
        storage.check_download(KEY, now=NOW, **download_params(url))
    assert await storage.stat(KEY) is None


async def test_delete_removes_one_object_and_tolerates_a_retry(storage):
    await storage.put(KEY, b"hello", content_type="text/plain")
    await storage.put("orgs/org_a/files/f1/b.txt", b"keep", content_type="text/plain")
    await storage.delete(KEY)
    await storage.delete(KEY)
    assert await storage.stat(KEY) is None
    assert await storage.get("orgs/org_a/files/f1/b.txt") == b"keep"
    assert sorted(p.name for p in storage._path("orgs/org_a/files/f1").iterdir()) == [
        ".b.txt.type",
        "b.txt",
    ]
