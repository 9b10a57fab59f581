"""Object storage on S3 or any S3-compatible server, through aioboto3.

A signed upload is a presigned `PutObject` URL that binds the key, the content type, the exact
size when it was declared (`Content-Length`) and `If-None-Match: *` as signed headers, and the
expiry: the bucket refuses a body of another size or type, and a second upload to a key already
stored (412 Precondition Failed), so an address is used once. S3 cannot bound the size of a
presigned PUT without a declared size, so the stored object's real size and type are checked
again when the file is associated (`stat`). A signed download is a presigned `GetObject` URL
whose response carries the original's name (`Content-Disposition`) and content type.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import aioboto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import ClientError

from adapters.storage.disposition import attachment
from application.ports.object_storage import SignedUpload, StoredObject
from domain.errors import Invalid, NotFound
from domain.files import is_safe_key

MAX_PRESIGN_SECONDS = 7 * 24 * 3600


class S3ObjectStorage:
    """`ObjectStorage` in one bucket, optionally below a key prefix."""

    def __init__(self, client: Any, bucket: str, prefix: str = "") -> None:
        self._client = client
        self._bucket = bucket
        self._prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""

    def _key(self, key: str) -> str:
        if not is_safe_key(key):
            raise Invalid("Invalid storage key")
        return self._prefix + key

    async def sign_upload(
        self,
        key: str,
        *,
        content_type: str,
        size: int,
        expires_at: datetime,
    ) -> SignedUpload:
        # Content-Length is signed but not handed out: the client's HTTP library sends it.
        params: dict[str, Any] = {
            "Bucket": self._bucket,
            "Key": self._key(key),
            "ContentType": content_type,
            "ContentLength": size,
            "IfNoneMatch": "*",
        }
        headers = {"Content-Type": content_type, "If-None-Match": "*"}
        url = await self._client.generate_presigned_url(
            "put_object", Params=params, ExpiresIn=_seconds(expires_at), HttpMethod="PUT"
        )
        return SignedUpload(url=url, method="PUT", headers=headers, expires_at=expires_at)

    async def sign_download(
        self,
        key: str,
        *,
        expires_at: datetime,
        file_name: str | None = None,
        content_type: str | None = None,
    ) -> str:
        params: dict[str, Any] = {"Bucket": self._bucket, "Key": self._key(key)}
        if file_name:
            params["ResponseContentDisposition"] = attachment(file_name)
        if content_type:
            params["ResponseContentType"] = content_type
        url: str = await self._client.generate_presigned_url(
            "get_object", Params=params, ExpiresIn=_seconds(expires_at), HttpMethod="GET"
        )
        return url

    async def stat(self, key: str) -> StoredObject | None:
        try:
            head = await self._client.head_object(Bucket=self._bucket, Key=self._key(key))
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return None
            raise
        return StoredObject(size=int(head["ContentLength"]), content_type=head.get("ContentType"))

    async def check(self) -> None:
        """Raise unless the bucket takes a write: a small object put and deleted under this
        service's prefix (what its keys may do; `HeadBucket` would need bucket-wide rights a
        key scoped to the prefix does not have)."""
        key = self._key(f"readiness/{secrets.token_hex(8)}")
        await self._client.put_object(Bucket=self._bucket, Key=key, Body=b"ok")
        await self._client.delete_object(Bucket=self._bucket, Key=key)

    async def put(self, key: str, data: bytes, *, content_type: str) -> None:
        await self._client.put_object(
            Bucket=self._bucket, Key=self._key(key), Body=data, ContentType=content_type
        )

    async def get(self, key: str) -> bytes:
        try:
            response = await self._client.get_object(Bucket=self._bucket, Key=self._key(key))
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise NotFound("Stored object not found") from None
            raise
        async with response["Body"] as body:
            data: bytes = await body.read()
        return data

    async def exists(self, key: str) -> bool:
        try:
            await self._client.head_object(Bucket=self._bucket, Key=self._key(key))
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return False
            raise
        return True

    async def delete(self, key: str) -> None:
        await self._client.delete_object(Bucket=self._bucket, Key=self._key(key))

    async def delete_prefix(self, prefix: str) -> int:
        if not prefix.endswith("/"):
            raise Invalid("A prefix must end with /")
        full = self._key(prefix.rstrip("/")) + "/"
        deleted = 0
        paginator = self._client.get_paginator("list_objects_v2")
        async for page in paginator.paginate(Bucket=self._bucket, Prefix=full):
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:
                await self._client.delete_objects(
                    Bucket=self._bucket, Delete={"Objects": keys, "Quiet": True}
                )
                deleted += len(keys)
        return deleted


def _seconds(expires_at: datetime) -> int:
    seconds = int((expires_at - datetime.now(UTC)).total_seconds())
    return max(1, min(seconds, MAX_PRESIGN_SECONDS))


def _config(path_style: bool) -> Config:
    return Config(
        signature_version="s3v4",
        s3={"addressing_style": "path" if path_style else "auto"},
        # Three attempts (botocore's backoff: at most 3 s in all) and a short connect timeout:
        # a store that is down fails a request within seconds (503) rather than 20; a job
        # that meets it is retried by the queue with its own backoff.
        retries={"max_attempts": 3, "mode": "standard"},
        connect_timeout=5,
    )


@asynccontextmanager
async def s3_client(
    *, endpoint_url: str | None, region: str, path_style: bool
) -> AsyncIterator[Any]:
    """One long-lived client; credentials come from the standard AWS chain."""
    session = aioboto3.Session()
    async with session.client(
        "s3", endpoint_url=endpoint_url, region_name=region, config=_config(path_style)
    ) as client:
        yield client


def signed_address_origin(
    *, bucket: str, endpoint_url: str | None, region: str, path_style: bool
) -> str:
    """The origin (`scheme://host[:port]`) of the signed addresses this store hands out, as
    botocore builds them (virtual-hosted or path-style, AWS or another endpoint): what a browser
    PUTs an upload to. Signing is local: placeholder credentials, no request is made."""
    client = botocore.session.get_session().create_client(
        "s3",
        endpoint_url=endpoint_url,
        region_name=region,
        aws_access_key_id="origin",
        aws_secret_access_key="origin",  # noqa: S106 (signs nothing that is sent)
        config=_config(path_style),
    )
    url = client.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "k"})
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
