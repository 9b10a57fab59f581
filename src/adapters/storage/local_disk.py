"""Object storage on the local disk, serving its own signed upload and download addresses.

A signed upload address is `{public_url}/storage/{key}?ct=&size=&exp=&sig=` (PUT) and a signed
download address `{public_url}/storage/{key}?exp=&fn=&ct=&sig=` (GET), where `sig` is an
HMAC-SHA256 under a secret only the server knows over the method and every parameter, so an
upload signature never serves a download nor the other way round. Every parameter is checked
before a byte moves; a malformed one is refused with 403, never an error.

An upload is used once: it first claims its key by creating the object's content-type record
(`.<name>.type` beside it) exclusively, so a second upload to the same key (a replay of the
address, before or after the file was associated) is refused with 409 `Conflict`. The body goes
to a temporary file beside the target and is linked into place only when it arrived whole
within the limit, so a refused or broken upload stores nothing and releases its claim.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import quote, urlencode

from application.ports.object_storage import SignedUpload, StoredObject
from domain.errors import Conflict, Forbidden, Invalid, NotFound, PayloadTooLarge
from domain.files import is_safe_key
from domain.uploads import UPLOAD_ALREADY_USED

UPLOAD_PATH = "/storage"
_NUMBER = re.compile(r"[0-9]{1,15}")
_SIGNATURE = re.compile(r"[0-9a-f]{64}")
_INVALID = "Invalid upload signature"
_INVALID_DOWNLOAD = "Invalid download signature"
_SIZE_EXCEEDED = "File exceeds the size the upload address was signed for"


def _size_short(size: int) -> str:
    return f"The upload must be exactly {size} bytes, the size the address was signed for"


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Download:
    """A verified download: the file to send, its attachment name and content type."""

    path: Path
    file_name: str | None
    content_type: str


def _type_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.type")


def _number(value: str | None) -> int | None:
    return int(value) if value is not None and _NUMBER.fullmatch(value) else None


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

    def _signature(self, *fields: str | int) -> str:
        message = json.dumps([str(f) for f in fields], ensure_ascii=True).encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def _valid(self, signature: str | None, *fields: str | int) -> bool:
        if signature is None or not _SIGNATURE.fullmatch(signature):
            return False
        return hmac.compare_digest(self._signature(*fields), signature)

    def _url(self, key: str, query: dict[str, str | int]) -> str:
        return f"{self._public_url}{UPLOAD_PATH}/{quote(key)}?{urlencode(query)}"

    async def sign_upload(
        self,
        key: str,
        *,
        content_type: str,
        size: int,
        expires_at: datetime,
    ) -> SignedUpload:
        self._path(key)
        expires = int(expires_at.timestamp())
        signature = self._signature("PUT", key, content_type, size, expires)
        return SignedUpload(
            url=self._url(
                key, {"ct": content_type, "size": size, "exp": expires, "sig": signature}
            ),
            method="PUT",
            headers={"Content-Type": content_type},
            expires_at=expires_at,
        )

    async def sign_download(
        self,
        key: str,
        *,
        expires_at: datetime,
        file_name: str | None = None,
        content_type: str | None = None,
    ) -> str:
        self._path(key)
        expires = int(expires_at.timestamp())
        name, kind = file_name or "", content_type or ""
        signature = self._signature("GET", key, name, kind, expires)
        query: dict[str, str | int] = {"exp": expires}
        if name:
            query["fn"] = name
        if kind:
            query["ct"] = kind
        query["sig"] = signature
        return self._url(key, query)

    def check_signature(
        self,
        key: str,
        *,
        content_type: str | None,
        size: str | None,
        expires: str | None,
        signature: str | None,
        sent_content_type: str | None,
        now: datetime,
    ) -> int:
        """Verify a signed upload's parameters; return the signed size.

        Raises `Forbidden` for a missing, malformed, tampered or expired signature, or a
        Content-Type header other than the signed one.
        """
        if not (content_type and size and expires and signature):
            raise Forbidden("Missing upload signature")
        limit, expiry = _number(size), _number(expires)
        if limit is None or expiry is None:
            raise Forbidden(_INVALID)
        if not self._valid(signature, "PUT", key, content_type, limit, expiry):
            raise Forbidden(_INVALID)
        if now.timestamp() >= expiry:
            raise Forbidden("Upload URL has expired")
        if (sent_content_type or "").strip().lower() != content_type.lower():
            raise Forbidden("Content-Type does not match the signed upload")
        return limit

    def check_download(
        self,
        key: str,
        *,
        expires: str | None,
        file_name: str | None,
        content_type: str | None,
        signature: str | None,
        now: datetime,
    ) -> Download:
        """Verify a signed download; the object to send. `Forbidden` for a missing, malformed,
        tampered or expired signature; `NotFound` when nothing is stored at `key`."""
        expiry = _number(expires)
        if expiry is None or not signature:
            raise Forbidden("Missing download signature")
        if not self._valid(signature, "GET", key, file_name or "", content_type or "", expiry):
            raise Forbidden(_INVALID_DOWNLOAD)
        if now.timestamp() >= expiry:
            raise Forbidden("Download URL has expired")
        path = self._path(key)
        if not path.is_file():
            raise NotFound("Stored object not found")
        stored = self._stored_type(path)
        return Download(
            path=path,
            file_name=file_name or None,
            content_type=content_type or stored or "application/octet-stream",
        )

    async def receive(
        self,
        key: str,
        chunks: AsyncIterator[bytes],
        *,
        content_type: str,
        size: int,
        declared: int | None,
    ) -> StoredUpload:
        """Write an upload's body to `key` once; refuse it whole when it is not `size` bytes
        (`PayloadTooLarge` when larger, `Invalid` when shorter) and when `key` was already
        uploaded to (`Conflict`)."""
        if declared is not None and declared > size:
            raise PayloadTooLarge(_SIZE_EXCEEDED)
        if declared is not None and declared < size:
            raise Invalid(_size_short(size))
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        marker = _type_path(target)
        try:
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise Conflict(UPLOAD_ALREADY_USED) from None
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content_type)
        partial = target.with_name(f".{target.name}.{secrets.token_hex(8)}.part")
        digest = hashlib.md5(usedforsecurity=False)
        received = 0
        stored = False
        try:
            with partial.open("wb") as handle:
                async for chunk in chunks:
                    received += len(chunk)
                    if received > size:
                        raise PayloadTooLarge(_SIZE_EXCEEDED)
                    digest.update(chunk)
                    await asyncio.to_thread(handle.write, chunk)
            if received < size:
                raise Invalid(_size_short(size))
            try:
                os.link(partial, target)  # never replaces an object already stored
            except FileExistsError:
                raise Conflict(UPLOAD_ALREADY_USED) from None
            stored = True
        finally:
            partial.unlink(missing_ok=True)
            if not stored:
                marker.unlink(missing_ok=True)
        return StoredUpload(key=key, size=received, etag=digest.hexdigest())

    async def check(self) -> None:
        """Raise unless the storage folder takes a write: a small file made and removed."""

        def probe() -> None:
            path = self._root / f".ready-{secrets.token_hex(8)}"
            try:
                path.write_bytes(b"ok")
            finally:
                path.unlink(missing_ok=True)

        await asyncio.to_thread(probe)

    async def put(self, key: str, data: bytes, *, content_type: str) -> None:
        target = self._path(key)

        def write(path: Path, content: bytes) -> None:
            partial = path.with_name(f".{path.name}.{secrets.token_hex(8)}.part")
            try:
                partial.write_bytes(content)
                os.replace(partial, path)
            finally:
                partial.unlink(missing_ok=True)

        def store() -> None:
            target.parent.mkdir(parents=True, exist_ok=True)
            write(target, data)
            write(_type_path(target), content_type.encode())

        await asyncio.to_thread(store)

    async def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            raise NotFound("Stored object not found") from None

    async def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    async def stat(self, key: str) -> StoredObject | None:
        path = self._path(key)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return None
        if not path.is_file():
            return None
        return StoredObject(size=size, content_type=self._stored_type(path))

    @staticmethod
    def _stored_type(path: Path) -> str | None:
        try:
            return _type_path(path).read_text(encoding="utf-8") or None
        except (FileNotFoundError, UnicodeDecodeError):
            return None

    async def delete(self, key: str) -> None:
        target = self._path(key)

        def remove() -> None:
            # The object before its type marker: a marker left alone still claims the key.
            target.unlink(missing_ok=True)
            _type_path(target).unlink(missing_ok=True)

        await asyncio.to_thread(remove)

    async def delete_prefix(self, prefix: str) -> int:
        if not prefix.endswith("/"):
            raise Invalid("A prefix must end with /")
        folder = self._path(prefix.rstrip("/"))

        def remove() -> int:
            if not folder.is_dir():
                return 0
            count = sum(1 for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
            shutil.rmtree(folder)
            return count

        return await asyncio.to_thread(remove)
