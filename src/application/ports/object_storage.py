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


class ObjectStorage(Protocol):
    """Blob storage for originals, extracted text and page images.

    Keys are relative paths such as `orgs/<org>/files/<fileId>/name.pdf`; the adapter never
    lets a key escape its root. A signed upload binds the key, the content type, the expiry
    and the maximum size: an upload that breaks any of them is refused and stores nothing.
    """

    async def sign_upload(
        self, key: str, *, content_type: str, max_size: int, expires_at: datetime
    ) -> SignedUpload:
        """A signed address that accepts exactly one object at `key` until `expires_at`."""
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

    async def delete_prefix(self, prefix: str) -> int:
        """Delete every object whose key starts with `prefix` (ending in `/`); return how many."""
        ...
