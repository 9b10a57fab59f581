"""`GET /kb/files/download`: a 302 to a short-lived signed address, and on local-disk storage
the signed `GET /storage/{key}` that serves it."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from sqlalchemy import text

from adapters.storage.local_disk import LocalDiskStorage, load_or_create_secret
from tests.http.helpers import association, make_kb, presign, put_upload


@pytest.fixture
async def app_client(client):
    return client


def local(url: str) -> str:
    parts = urlsplit(url)
    assert parts.netloc == "testserver.local"
    return f"{parts.path}?{parts.query}"


async def a_file(client, who, settings, name="Résumé 2026.txt", data=b"hello world"):
    kb = await make_kb(client, who)
    upload = await presign(client, who, name=name, content_type="text/plain", size=len(data))
    assert (await put_upload(client, upload, data)).status_code == 200
    response = await client.post(
        "/kb/files",
        json=association(kb["id"], upload, fileName=name, contentType="text/plain", fileSize=11),
        headers=who.headers,
    )
    assert response.status_code == 201, response.text
    return kb, response.json()["file"]


def query(kb, record, extra=""):
    return f"/kb/files/download?kbId={kb['id']}&fileId={record['fileId']}{extra}"


async def test_the_original_redirects_to_a_signed_address(app_client, alice, settings):
    kb, record = await a_file(app_client, alice, settings)
    for extra in ("", "&part=original"):
        response = await app_client.get(
            query(kb, record, extra), headers=alice.headers, follow_redirects=False
        )
        assert response.status_code == 302, response.text
        assert response.headers["location"].startswith(
            f"http://testserver.local/storage/{record['fileKey']}?exp="
        )
    served = await app_client.get(local(response.headers["location"]))
    assert served.status_code == 200 and served.content == b"hello world"
    assert served.headers["content-type"].startswith("text/plain")
    assert served.headers["content-disposition"] == (
        "attachment; filename=\"Resume 2026.txt\"; filename*=UTF-8''R%C3%A9sum%C3%A9%202026.txt"
    )


async def test_the_content_and_page_images(app_client, alice, settings):
    kb, record = await a_file(app_client, alice, settings)
    missing = await app_client.get(
        query(kb, record, "&part=content"), headers=alice.headers, follow_redirects=False
    )
    assert (missing.status_code, missing.json()) == (404, {"error": "File content not found"})
    content = settings.data_dir.resolve() / "objects" / record["contentKey"]
    content.write_bytes(b"# extracted")
    found = await app_client.get(
        query(kb, record, "&part=content"), headers=alice.headers, follow_redirects=False
    )
    assert found.status_code == 302
    served = await app_client.get(local(found.headers["location"]))
    assert served.content == b"# extracted"
    assert served.headers["content-type"].startswith("text/markdown")
    page = await app_client.get(
        query(kb, record, "&part=image&page=1"), headers=alice.headers, follow_redirects=False
    )
    assert (page.status_code, page.json()) == (404, {"error": "Page image not found"})


async def test_a_page_image_is_served_by_its_page_number(app_client, alice, settings, owner_engine):
    kb, record = await a_file(app_client, alice, settings)
    data_dir = settings.data_dir.resolve()
    storage = LocalDiskStorage(
        data_dir / "objects",
        "http://testserver.local",
        load_or_create_secret(data_dir / "storage-signing.key"),
    )
    keys = [f"{record['fileKey'].rsplit('/', 1)[0]}/images/page-{n}.png" for n in (1, 2)]
    for n, key in enumerate(keys, start=1):
        await storage.put(key, b"\x89PNG page %d" % n, content_type="image/png")
    async with owner_engine.begin() as connection:
        await connection.execute(
            text("UPDATE knowledge_base_files SET image_keys = :keys WHERE id = :id"),
            {"keys": keys, "id": record["id"]},
        )
    for page in (1, 2):
        found = await app_client.get(
            query(kb, record, f"&part=image&page={page}"),
            headers=alice.headers,
            follow_redirects=False,
        )
        assert found.status_code == 302, found.text
        served = await app_client.get(local(found.headers["location"]))
        assert served.status_code == 200 and served.content == b"\x89PNG page %d" % page
        assert served.headers["content-type"] == "image/png"
    beyond = await app_client.get(
        query(kb, record, "&part=image&page=3"), headers=alice.headers, follow_redirects=False
    )
    assert (beyond.status_code, beyond.json()) == (404, {"error": "Page image not found"})


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        ("&part=thumbnail", "part must be one of original, content, image"),
        ("&part=image", "page must be a positive integer, and only with part=image"),
        ("&part=image&page=0", "page must be a positive integer, and only with part=image"),
        ("&part=image&page=%C2%B2", "page must be a positive integer, and only with part=image"),
        ("&page=1", "page must be a positive integer, and only with part=image"),
    ],
)
async def test_bad_parameters_are_400(app_client, alice, settings, extra, error):
    kb, record = await a_file(app_client, alice, settings)
    response = await app_client.get(
        query(kb, record, extra), headers=alice.headers, follow_redirects=False
    )
    assert response.status_code == 400 and response.json()["error"] == error


async def test_misses_are_404_like_the_other_file_endpoints(app_client, alice, bob, settings):
    kb, record = await a_file(app_client, alice, settings)
    cases = [
        (bob.headers, query(kb, record), 404, "Knowledge base not found"),
        (alice.headers, f"/kb/files/download?kbId=999999&fileId={record['fileId']}", 404,
         "Knowledge base not found"),
        (alice.headers, f"/kb/files/download?kbId={kb['id']}&fileId={'1' * 8}-1111-4111-8111-"
         f"{'1' * 12}", 404, "File not found"),
        (alice.headers, f"/kb/files/download?kbId=x&fileId={record['fileId']}", 400,
         "Valid knowledge base ID is required"),
        (alice.headers, f"/kb/files/download?kbId={kb['id']}", 400, "Valid file ID is required"),
    ]  # fmt: skip
    for headers, url, status, error in cases:
        response = await app_client.get(url, headers=headers, follow_redirects=False)
        assert (response.status_code, response.json()["error"]) == (status, error), url
    unauthenticated = await app_client.get(query(kb, record))
    assert unauthenticated.status_code == 401


async def test_a_tampered_or_upload_signature_serves_nothing(app_client, alice, settings):
    kb, record = await a_file(app_client, alice, settings)
    location = local(
        (
            await app_client.get(query(kb, record), headers=alice.headers, follow_redirects=False)
        ).headers["location"]
    )
    path, _, params = location.partition("?")
    for bad in (
        location.replace("sig=", "sig=0"),
        location.replace("fn=", "fn=x"),
        f"{path}?{params.replace('exp=', 'exp=1')}",
        path,
        f"{path}?exp=%C2%B2&sig=zz",
        f"{path.replace('Resume', 'Other')}?{params}",
    ):
        response = await app_client.get(bad)
        assert response.status_code in (403, 404), bad
        assert set(response.json()) <= {"error", "details"}
    upload = await presign(app_client, alice, name="b.txt", content_type="text/plain", size=1)
    upload_path = upload["uploadUrl"].removeprefix("http://testserver.local")
    assert (await app_client.get(upload_path)).status_code == 403
