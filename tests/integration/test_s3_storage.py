"""The S3 adapter against an S3-compatible server (moto in server mode) on loopback, through
real HTTP, including a presigned PUT made by a plain HTTP client."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from adapters.storage.s3 import S3ObjectStorage, s3_client
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
        max_size=100,
        expires_at=datetime.now(UTC) + timedelta(minutes=15),
    )
    assert signed.method == "PUT" and "X-Amz-Signature" in signed.url
    async with httpx.AsyncClient() as http:
        response = await http.put(signed.url, content=b"%PDF bytes", headers=signed.headers)
    assert response.status_code == 200, response.text
    assert await storage.get(KEY) == b"%PDF bytes"


async def test_presigned_put_signs_the_key_content_type_and_expiry(storage):
    # moto does not verify SigV4 signatures, so what the signature covers is checked here.
    expires_at = datetime.now(UTC) + timedelta(minutes=15)
    signed = await storage.sign_upload(
        KEY, content_type="application/pdf", max_size=100, expires_at=expires_at
    )
    parts = urlsplit(signed.url)
    query = parse_qs(parts.query)
    assert parts.path.endswith("/tenant-data/" + KEY)
    assert query["X-Amz-SignedHeaders"] == ["content-type;host"]
    assert 890 <= int(query["X-Amz-Expires"][0]) <= 900
    assert signed.headers == {"Content-Type": "application/pdf"}


async def test_keys_are_checked(storage):
    with pytest.raises(Invalid):
        await storage.put("../escape", b"x", content_type="text/plain")
