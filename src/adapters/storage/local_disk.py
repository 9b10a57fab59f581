"""Object storage on the local disk, serving its own signed upload addresses.

A signed address is `{public_url}/storage/{key}?ct=&max=&exp=&sig=`, where `sig` is an
HMAC-SHA256 over the key, content type, maximum size and expiry under a secret only the
server knows. The upload handler checks all four before a byte is kept, writes to a temporary
file beside the target and renames it into place only when the whole body arrived within the
limit, so a refused or broken upload stores nothing.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import secrets
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, urlencode

from application.ports.object_storage import SignedUpload
from domain.errors import Forbidden, Invalid, NotFound, PayloadTooLarge
from domain.files import is_safe_key

UPLOAD_PATH = "/storage"


def load_or_create_secret(path: Path) -> bytes:
    """The signing secret kept at `path`, created (readable by the owner only) when absent."""
    if path.exists():
        return base64.b64decode(path.read_bytes())
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(base64.b64encode(secret))
    return secret


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredUpload:
    key: str
    size: int
    etag: str


class LocalDiskStorage:
    """`ObjectStorage` in a folder of the local disk."""

    def __init__(self, root: Path, public_url: str, secret: bytes) -> None:
        self._root = root.resolve()
        self._public_url = public_url.rstrip("/")
        self._secret = secret
        self._root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        if not is_safe_key(key):
            raise Invalid("Invalid storage key")
        path = (self._root / key).resolve()
        if not path.is_relative_to(self._root):
            raise Invalid("Invalid storage key")
        return path

    def _signature(self, key: str, content_type: str, max_size: int, expires: int) -> str:
        message = "\n".join((key, content_type, str(max_size), str(expires))).encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    async def sign_upload(
        self, key: str, *, content_type: str, max_size: int, expires_at: datetime
    ) -> SignedUpload:
        self._path(key)
        expires = int(expires_at.timestamp())
        query = urlencode(
            {
                "ct": content_type,
                "max": max_size,
                "exp": expires,
                "sig": self._signature(key, content_type, max_size, expires),
            }
        )
        return SignedUpload(
            url=f"{self._public_url}{UPLOAD_PATH}/{quote(key)}?{query}",
            method="PUT",
            headers={"Content-Type": content_type},
            expires_at=expires_at,
        )

    def check_signature(
        self,
        key: str,
        *,
        content_type: str | None,
        max_size: str | None,
        expires: str | None,
        signature: str | None,
        sent_content_type: str | None,
        now: datetime,
    ) -> int:
        """Verify a signed upload's parameters; return the signed maximum size.

        Raises `Forbidden` for a missing, tampered or expired signature, or a Content-Type
        header other than the signed one.
        """
        if not (content_type and max_size and expires and signature):
            raise Forbidden("Missing upload signature")
        if not (max_size.isdigit() and expires.isdigit()):
            raise Forbidden("Invalid upload signature")
        expected = self._signature(key, content_type, int(max_size), int(expires))
        if not hmac.compare_digest(expected, signature):
            raise Forbidden("Invalid upload signature")
        if now >= datetime.fromtimestamp(int(expires), UTC):
            raise Forbidden("Upload URL has expired")
        if (sent_content_type or "").strip().lower() != content_type.lower():
            raise Forbidden("Content-Type does not match the signed upload")
        return int(max_size)

    async def receive(
        self, key: str, chunks: AsyncIterator[bytes], *, max_size: int, declared: int | None
    ) -> StoredUpload:
        """Write an upload's body to `key`; refuse it whole when it exceeds `max_size`."""
        if declared is not None and declared > max_size:
            raise PayloadTooLarge("File exceeds the maximum upload size")
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.{secrets.token_hex(8)}.part")
        digest = hashlib.md5(usedforsecurity=False)
        size = 0
        try:
            with partial.open("wb") as handle:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > max_size:
                        raise PayloadTooLarge("File exceeds the maximum upload size")
                    digest.update(chunk)
                    await asyncio.to_thread(handle.write, chunk)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
        return StoredUpload(key=key, size=size, etag=digest.hexdigest())

    async def put(self, key: str, data: bytes, *, content_type: str) -> None:
        target = self._path(key)

        def write() -> None:
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.{secrets.token_hex(8)}.part")
            try:
                partial.write_bytes(data)
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)

        await asyncio.to_thread(write)

    async def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            raise NotFound("Stored object not found") from None

    async def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    async def delete_prefix(self, prefix: str) -> int:
        if not prefix.endswith("/"):
            raise Invalid("A prefix must end with /")
        folder = self._path(prefix.rstrip("/"))

        def remove() -> int:
            if not folder.is_dir():
                return 0
            count = sum(1 for p in folder.rglob("*") if p.is_file())
            shutil.rmtree(folder)
            return count

        return await asyncio.to_thread(remove)
