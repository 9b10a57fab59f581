from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol, TypeVar

from domain.files import FileCursor, KnowledgeBaseFile, NewFile, ProcessingStatus


class FileKey(Protocol):
    """What a listing reads back from the views it built: the keys of its order."""

    @property
    def id(self) -> int: ...

    @property
    def created_at(self) -> datetime: ...


View = TypeVar("View", bound=FileKey)


class FileRepository(Protocol):
    """File records of knowledge bases, scoped to one organization like every repository."""

    async def add(self, new: NewFile) -> KnowledgeBaseFile:
        """Insert a file record in state `parsing`.

        Raises `Conflict` when the same file id is already associated with that knowledge base.
        """
        ...

    async def list_for_knowledge_base(self, org_id: str, kb_id: int) -> list[KnowledgeBaseFile]:
        """The knowledge base's files, newest first."""
        ...

    async def list_views(
        self,
        org_id: str,
        kb_id: int,
        view: Callable[..., View],
        *,
        limit: int | None = None,
        after: FileCursor | None = None,
    ) -> list[View]:
        """The knowledge base's files as its members see them, newest first (by `created_at`,
        then record id): those after `after` when it is given (all of them otherwise), at most
        `limit` of them when it is given.

        Each is what `view` returns when called with the file's `FILE_VIEW_FIELDS`, positionally
        and in that order (the status as its text): a listing builds its caller's view straight
        from what is stored, with no entity in between.
        """
        ...

    async def get(self, org_id: str, kb_id: int, file_id: str) -> KnowledgeBaseFile | None:
        """One file of a knowledge base by its file id (uuid), or None."""
        ...

    async def delete(self, org_id: str, record_id: int) -> None:
        """Delete one file record and, with it, its chunks."""
        ...

    async def get_by_id(self, org_id: str, record_id: int) -> KnowledgeBaseFile | None:
        """One file by its record id, or None."""
        ...

    async def begin_attempt(self, org_id: str, record_id: int) -> int:
        """Count one more processing run of the file and return the count (durable once
        committed, so a file that keeps killing its worker can be stopped)."""
        ...

    async def lock_if_chunking(self, org_id: str, record_id: int) -> bool:
        """Lock the file until the transaction ends; True when it is in `chunking` (False when
        it is in another state or gone)."""
        ...

    async def set_status(
        self, org_id: str, record_id: int, status: ProcessingStatus, error: str | None = None
    ) -> None:
        """Move the file to `status`; `error` is its `processingError` (None clears it)."""
        ...

    async def set_image_keys(self, org_id: str, record_id: int, keys: list[str]) -> None:
        """Record the storage keys of the file's images (PDF pages, or the image itself)."""
        ...

    async def set_ocr_pages(self, org_id: str, record_id: int, pages: int) -> None:
        """Record how many of the file's pages its extraction read by OCR (`ocrPages`)."""
        ...

    async def set_extracted_data(
        self, org_id: str, record_id: int, data: dict[str, Any] | None
    ) -> None:
        """Store the structured data extracted from the file (None clears it)."""
        ...

    async def restart(self, org_id: str, record_id: int) -> None:
        """Put the file back to `parsing` with no error and no attempts, for reprocessing."""
        ...
