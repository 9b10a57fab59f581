from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True, kw_only=True)
class SignedUpload:
    """Where and how a client sends a file's bytes without further credentials."""

    url: str
    method: str
    headers: dict[str, str] = field(default_factory=dict)
    expires_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredObject:
    """What storage knows of a stored object: its real size, and its content type when the
    storage records one (None otherwise)."""

    size: int
    content_type: str | None


class ObjectStorage(Protocol):
    """Blob storage for originals, extracted text and page images.

    Keys are relative paths such as `orgs/<org>/files/<fileId>/name.pdf`; the adapter never
    lets a key escape its root. A signed upload binds the key, the content type, the expiry
    and the exact size, and is used once: an upload that breaks any of them, or that comes
    when an object is already stored at its key, is refused and stores nothing.
    """

    async def sign_upload(
        self,
        key: str,
        *,
        content_type: str,
        size: int,
        expires_at: datetime,
    ) -> SignedUpload:
        """A signed address that accepts exactly one object of `size` bytes and `content_type`
        at `key` until `expires_at`, and only while nothing is stored there."""
        ...

    async def sign_download(
        self,
        key: str,
        *,
        expires_at: datetime,
        file_name: str | None = None,
        content_type: str | None = None,
    ) -> str:
        """A signed address that serves the object at `key` with GET until `expires_at`:
        as an attachment named `file_name` when given, with `content_type` when given."""
        ...

    async def stat(self, key: str) -> StoredObject | None:
        """The stored object's real size and content type, or None when there is none."""
        ...

    async def put(self, key: str, data: bytes, *, content_type: str) -> None:
        """Store `data` at `key`, replacing what was there, atomically."""
        ...

    async def get(self, key: str) -> bytes:
        """The object's bytes; raises `NotFound` when there is none."""
        ...

    async def exists(self, key: str) -> bool:
        """Whether an object is stored at `key`."""
        ...

    async def delete(self, key: str) -> None:
        """Delete the object at `key`; nothing happens when there is none, so a retry after a
        failure finishes the job."""
        ...

    async def delete_prefix(self, prefix: str) -> int:
        """Delete every object whose key starts with `prefix` (ending in `/`); return how many."""
        ...

    async def check(self) -> None:
        """Raise unless the store answers and takes writes (readiness: `GET /health/ready`)."""
        ...
