"""The S3 adapter against an S3-compatible server (moto in server mode) on loopback, through
real HTTP, including a presigned PUT made by a plain HTTP client."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from adapters.storage.s3 import S3ObjectStorage, s3_client
from application.ports.object_storage import StoredObject
from domain.errors import Invalid, NotFound

KEY = "orgs/org_a/files/f1/report.pdf"


@pytest.fixture
async def storage(s3_endpoint):
    async with s3_client(endpoint_url=s3_endpoint, region="us-east-1", path_style=True) as client:
        bucket = f"b{uuid.uuid4().hex[:12]}"
        await client.create_bucket(Bucket=bucket)
        yield S3ObjectStorage(client, bucket, prefix="tenant-data")


async def test_put_get_exists_delete(storage):
    await storage.put(KEY, b"%PDF-1.7", content_type="application/pdf")
    await storage.put("orgs/org_a/files/f1/content.md", b"# x", content_type="text/markdown")
    await storage.put("orgs/org_a/files/f2/other.txt", b"keep", content_type="text/plain")
    assert await storage.get(KEY) == b"%PDF-1.7"
    assert await storage.exists(KEY)
    assert await storage.delete_prefix("orgs/org_a/files/f1/") == 2
    assert not await storage.exists(KEY)
    with pytest.raises(NotFound):
        await storage.get(KEY)
    assert await storage.get("orgs/org_a/files/f2/other.txt") == b"keep"


async def test_presigned_put_by_a_plain_http_client(storage):
    signed = await storage.sign_upload(
        KEY,
        content_type="application/pdf",
        size=10,
        expires_at=datetime.now(UTC) + timedelta(minutes=15),
    )
    assert signed.method == "PUT" and "X-Amz-Signature" in signed.url
    async with httpx.AsyncClient() as http:
        response = await http.put(signed.url, content=b"%PDF bytes", headers=signed.headers)
    assert response.status_code == 200, response.text
    assert await storage.get(KEY) == b"%PDF bytes"


async def test_presigned_put_signs_the_key_size_content_type_and_expiry(storage):
    # moto does not verify SigV4 signatures, so what the signature covers is checked here.
    expires_at = datetime.now(UTC) + timedelta(minutes=15)
    signed = await storage.sign_upload(
        KEY, content_type="application/pdf", size=10, expires_at=expires_at
    )
    parts = urlsplit(signed.url)
    query = parse_qs(parts.query)
    assert parts.path.endswith("/tenant-data/" + KEY)
    assert query["X-Amz-SignedHeaders"] == ["content-length;content-type;host;if-none-match"]
    assert 890 <= int(query["X-Amz-Expires"][0]) <= 900
    # Content-Length is left to the client's HTTP library, which sends the body's length.
    assert signed.headers == {"Content-Type": "application/pdf", "If-None-Match": "*"}


async def test_a_presigned_put_is_used_once(storage):
    signed = await storage.sign_upload(
        KEY,
        content_type="application/pdf",
        size=5,
        expires_at=datetime.now(UTC) + timedelta(minutes=15),
    )
    async with httpx.AsyncClient() as http:
        first = await http.put(signed.url, content=b"first", headers=signed.headers)
        replay = await http.put(signed.url, content=b"again", headers=signed.headers)
    assert first.status_code == 200, first.text
    assert replay.status_code == 412, replay.text
    assert await storage.get(KEY) == b"first"
    assert await storage.stat(KEY) == StoredObject(size=5, content_type="application/pdf")
    assert await storage.stat("orgs/org_a/files/f1/none.pdf") is None


async def test_a_presigned_get_serves_the_object_as_an_attachment(storage):
    await storage.put(KEY, b"%PDF-1.7", content_type="application/pdf")
    url = await storage.sign_download(
        KEY,
        expires_at=datetime.now(UTC) + timedelta(minutes=5),
        file_name="Rapport été.pdf",
        content_type="application/pdf",
    )
    query = parse_qs(urlsplit(url).query)
    assert 290 <= int(query["X-Amz-Expires"][0]) <= 300
    assert query["response-content-disposition"] == [
        "attachment; filename=\"Rapport ete.pdf\"; filename*=UTF-8''Rapport%20%C3%A9t%C3%A9.pdf"
    ]
    async with httpx.AsyncClient() as http:
        response = await http.get(url)
    assert response.status_code == 200, response.text
    assert response.content == b"%PDF-1.7"


async def test_keys_are_checked(storage):
    with pytest.raises(Invalid):
        await storage.put("../escape", b"x", content_type="text/plain")


async def test_delete_removes_one_object_and_tolerates_a_retry(storage):
    await storage.put(KEY, b"hello", content_type="text/plain")
    await storage.put("orgs/org_a/files/f1/b.txt", b"keep", content_type="text/plain")
    await storage.delete(KEY)
    await storage.delete(KEY)
    assert await storage.stat(KEY) is None
    assert await storage.get("orgs/org_a/files/f1/b.txt") == b"keep"
