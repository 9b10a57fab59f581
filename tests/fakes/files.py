"""A fake `FileRepository` in memory: the file records of knowledge bases and their processing
state.

It also keeps what a test wants to look at: `runs` (processing attempts per record id, which a
test may set) and `history` (every status set, in order). Neither is in the snapshot a
`FakeUnitOfWork` restores at a rollback."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from domain.errors import Conflict
from domain.files import FileCursor, KnowledgeBaseFile, NewFile, ProcessingStatus, view_values
from domain.uploads import IssuedUpload, UploadState

if TYPE_CHECKING:
    from application.ports.file_repository import FileRepository, View
    from application.ports.issued_uploads import IssuedUploadRepository
    from tests.fakes.basics import Restorable

FilesState = tuple[dict[int, KnowledgeBaseFile], int]


class FakeFiles:
    def __init__(self) -> None:
        self.rows: dict[int, KnowledgeBaseFile] = {}
        self.runs: dict[int, int] = {}
        self.history: list[ProcessingStatus] = []
        self._next = 1

    def snapshot(self) -> FilesState:
        return dict(self.rows), self._next

    def restore(self, saved: FilesState) -> None:
        self.rows, self._next = dict(saved[0]), saved[1]

    def _replace(self, record_id: int, **changes: Any) -> None:
        self.rows[record_id] = dataclasses.replace(self.rows[record_id], **changes)

    # Records

    async def add(self, new: NewFile) -> KnowledgeBaseFile:
        if any(f.org_id == new.org_id and f.file_id == new.file_id for f in self.rows.values()):
            raise Conflict("This file is already associated with a knowledge base")
        now = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=self._next)
        record = KnowledgeBaseFile(
            id=self._next,
            processing_status=ProcessingStatus.PARSING,
            processing_error=None,
            image_keys=None,
            extracted_data=None,
            created_at=now,
            updated_at=now,
            **{f.name: getattr(new, f.name) for f in dataclasses.fields(new)},
        )
        self.rows[record.id] = record
        self._next += 1
        return record

    async def list_for_knowledge_base(self, org_id: str, kb_id: int) -> list[KnowledgeBaseFile]:
        rows = [
            f for f in self.rows.values() if f.org_id == org_id and f.knowledge_base_id == kb_id
        ]
        return sorted(rows, key=lambda f: f.id, reverse=True)

    async def list_views(
        self,
        org_id: str,
        kb_id: int,
        view: Callable[..., View],
        *,
        limit: int | None = None,
        after: FileCursor | None = None,
    ) -> list[View]:
        rows = sorted(
            await self.list_for_knowledge_base(org_id, kb_id),
            key=lambda f: (f.created_at, f.id),
            reverse=True,
        )
        if after is not None:
            rows = [f for f in rows if (f.created_at, f.id) < (after.created_at, after.record_id)]
        return [view(*view_values(f)) for f in rows[:limit]]

    async def get(self, org_id: str, kb_id: int, file_id: str) -> KnowledgeBaseFile | None:
        return next(
            (f for f in await self.list_for_knowledge_base(org_id, kb_id) if f.file_id == file_id),
            None,
        )

    async def delete(self, org_id: str, record_id: int) -> None:
        if record_id in self.rows and self.rows[record_id].org_id == org_id:
            del self.rows[record_id]

    # Processing

    async def get_by_id(self, org_id: str, record_id: int) -> KnowledgeBaseFile | None:
        f = self.rows.get(record_id)
        return f if f and f.org_id == org_id else None

    async def begin_attempt(self, org_id: str, record_id: int) -> int:
        self.runs[record_id] = self.runs.get(record_id, 0) + 1
        return self.runs[record_id]

    async def lock_if_chunking(self, org_id: str, record_id: int) -> bool:
        f = self.rows.get(record_id)
        return bool(f and f.org_id == org_id and f.processing_status is ProcessingStatus.CHUNKING)

    async def set_status(
        self, org_id: str, record_id: int, status: ProcessingStatus, error: str | None = None
    ) -> None:
        self._replace(record_id, processing_status=status, processing_error=error)
        self.history.append(status)

    async def set_image_keys(self, org_id: str, record_id: int, keys: list[str]) -> None:
        self._replace(record_id, image_keys=list(keys))

    async def set_ocr_pages(self, org_id: str, record_id: int, pages: int) -> None:
        self._replace(record_id, ocr_pages=pages)

    async def set_extracted_data(
        self, org_id: str, record_id: int, data: dict[str, Any] | None
    ) -> None:
        self._replace(record_id, extracted_data=data)

    async def restart(self, org_id: str, record_id: int) -> None:
        self._replace(record_id, processing_status=ProcessingStatus.PARSING, processing_error=None)
        self.runs.pop(record_id, None)


class FakeIssuedUploads:
    """Issued uploads by file id."""

    def __init__(self) -> None:
        self.rows: dict[str, IssuedUpload] = {}

    def issue(self, org_id: str, file_id: str, file_key: str) -> None:
        """Record an upload as `CreateUpload` would (a test's shortcut)."""
        self.rows[file_id] = IssuedUpload(
            org_id=org_id, file_id=file_id, file_key=file_key, content_type="text/plain",
            expires_at=datetime(2026, 1, 1, 0, 15, tzinfo=UTC),
        )  # fmt: skip

    def snapshot(self) -> dict[str, IssuedUpload]:
        return dict(self.rows)

    def restore(self, saved: dict[str, IssuedUpload]) -> None:
        self.rows = dict(saved)

    async def add(self, upload: IssuedUpload) -> None:
        self.rows[upload.file_id] = upload

    async def get(
        self, org_id: str, file_id: str, *, for_update: bool = False
    ) -> IssuedUpload | None:
        upload = self.rows.get(file_id)
        return upload if upload is not None and upload.org_id == org_id else None

    async def set_state(
        self, org_id: str, file_ids: Sequence[str], state: UploadState
    ) -> list[IssuedUpload]:
        moved = []
        for file_id in file_ids:
            upload = await self.get(org_id, file_id)
            if upload is not None:
                self.rows[file_id] = dataclasses.replace(upload, state=state)
                moved.append(self.rows[file_id])
        return moved


if TYPE_CHECKING:  # mypy checks the fake against the port it stands in for
    _files: FileRepository = FakeFiles()
    _files_store: Restorable[FilesState] = FakeFiles()
    _uploads: IssuedUploadRepository = FakeIssuedUploads()
    _uploads_store: Restorable[dict[str, IssuedUpload]] = FakeIssuedUploads()
