"""`FileRepository` on an organization-scoped asyncpg connection (the habits of
`knowledge_bases`: `org_id` in every statement, fixed statements, rows read by position)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from adapters.postgres.database import OrgConnection
from application.ports.file_repository import View
from domain.errors import Conflict
from domain.files import (
    FILE_VIEW_FIELDS,
    FileCursor,
    KnowledgeBaseFile,
    NewFile,
    ProcessingStatus,
)
from domain.uploads import ALREADY_ASSOCIATED

FILE_ORDER = (
    "id", "org_id", "knowledge_base_id", "file_id", "file_name", "file_key", "content_key",
    "content_type", "file_size", "processing_status", "processing_error", "image_keys",
    "user_metadata", "extracted_data", "created_at", "updated_at", "ocr_pages",
)  # fmt: skip


def _file_column(name: str, table: str = "f.") -> str:
    return f"{table}{name}::text" if name == "file_id" else f"{table}{name}"


FILE_COLUMNS = ", ".join(map(_file_column, FILE_ORDER))
FILE_RETURNING = ", ".join(_file_column(name, table="") for name in FILE_ORDER)

_KB_FILES = "FROM knowledge_base_files f WHERE f.org_id = $1 AND f.knowledge_base_id = $2"
_NEWEST_FIRST = "ORDER BY f.created_at DESC, f.id DESC"
LIST_FILES = f"SELECT {FILE_COLUMNS} {_KB_FILES} {_NEWEST_FIRST}"
# A listing's columns are the views' arguments, in `FILE_VIEW_FIELDS` order: each row goes
# to the view factory as it is (`PgFileRepository.list_views`). Three statements rather than
# one with optional parameters, so that each keeps a plan of its own.
FILE_VIEW_COLUMNS = ", ".join(map(_file_column, FILE_VIEW_FIELDS))
LIST_FILE_VIEWS = f"SELECT {FILE_VIEW_COLUMNS} {_KB_FILES} {_NEWEST_FIRST}"
LIST_FILE_VIEWS_FIRST_PAGE = f"{LIST_FILE_VIEWS} LIMIT $3"
LIST_FILE_VIEWS_NEXT_PAGE = (
    f"SELECT {FILE_VIEW_COLUMNS} {_KB_FILES} AND (f.created_at, f.id) < ($4, $5) "
    f"{_NEWEST_FIRST} LIMIT $3"
)
GET_FILE = f"SELECT {FILE_COLUMNS} {_KB_FILES} AND f.file_id = $3"
INSERT_FILE = f"""
    INSERT INTO knowledge_base_files (org_id, knowledge_base_id, file_id, file_name, file_key,
        content_key, content_type, file_size, processing_status, user_metadata)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, '{ProcessingStatus.PARSING.value}', $9)
    ON CONFLICT ON CONSTRAINT uq_knowledge_base_files_org_file DO NOTHING
    RETURNING {FILE_RETURNING}"""
DELETE_FILE = "DELETE FROM knowledge_base_files WHERE org_id = $1 AND id = $2"
GET_FILE_BY_ID = (
    f"SELECT {FILE_COLUMNS} FROM knowledge_base_files f WHERE f.org_id = $1 AND f.id = $2"
)
BEGIN_ATTEMPT = """
    UPDATE knowledge_base_files SET processing_attempts = processing_attempts + 1,
        updated_at = now()
    WHERE org_id = $1 AND id = $2 RETURNING processing_attempts"""
LOCK_IF_CHUNKING = """
    SELECT processing_status = 'chunking' FROM knowledge_base_files
    WHERE org_id = $1 AND id = $2 FOR UPDATE"""
SET_STATUS = """
    UPDATE knowledge_base_files SET processing_status = $3, processing_error = $4,
        updated_at = now()
    WHERE org_id = $1 AND id = $2"""
SET_IMAGES = """
    UPDATE knowledge_base_files SET image_keys = $3, updated_at = now()
    WHERE org_id = $1 AND id = $2"""
SET_OCR_PAGES = """
    UPDATE knowledge_base_files SET ocr_pages = $3, updated_at = now()
    WHERE org_id = $1 AND id = $2"""
SET_EXTRACTED = """
    UPDATE knowledge_base_files SET extracted_data = $3, updated_at = now()
    WHERE org_id = $1 AND id = $2"""
RESTART = """
    UPDATE knowledge_base_files SET processing_status = 'parsing', processing_error = NULL,
        processing_attempts = 0, updated_at = now()
    WHERE org_id = $1 AND id = $2"""
_STATUS = {status.value: status for status in ProcessingStatus}


# Rows are read by position straight into the entity, whose fields are in column order
# (checked below).
def _file(r: Any) -> KnowledgeBaseFile:
    return KnowledgeBaseFile(*(*r[:9], _STATUS[r[9]], *r[10:17]))


def _check_column_order() -> None:
    names = tuple(field.name for field in fields(KnowledgeBaseFile))
    if names != FILE_ORDER:
        raise TypeError(f"KnowledgeBaseFile fields {names} are not the columns {FILE_ORDER}")
    if tuple(name for name in FILE_ORDER if name != "org_id") != FILE_VIEW_FIELDS:
        raise TypeError(
            f"FILE_VIEW_FIELDS {FILE_VIEW_FIELDS} are not KnowledgeBaseFile's fields without org_id"
        )


_check_column_order()


class PgFileRepository:
    """`FileRepository` in Postgres."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def add(self, new: NewFile) -> KnowledgeBaseFile:
        rows = await self._db.fetch_in_transaction(
            INSERT_FILE, new.org_id, new.knowledge_base_id, uuid.UUID(new.file_id), new.file_name,
            new.file_key, new.content_key, new.content_type, new.file_size, new.user_metadata,
        )  # fmt: skip
        if not rows:
            raise Conflict(ALREADY_ASSOCIATED)
        return _file(rows[0])

    async def list_for_knowledge_base(self, org_id: str, kb_id: int) -> list[KnowledgeBaseFile]:
        return [_file(r) for r in await self._db.fetch(LIST_FILES, org_id, kb_id)]

    async def list_views(
        self,
        org_id: str,
        kb_id: int,
        view: Callable[..., View],
        *,
        limit: int | None = None,
        after: FileCursor | None = None,
    ) -> list[View]:
        # `LIMIT NULL` is no limit: `after` alone lists everything after it.
        if after is not None:
            rows = await self._db.fetch(
                LIST_FILE_VIEWS_NEXT_PAGE, org_id, kb_id, limit, after.created_at, after.record_id
            )
        elif limit is not None:
            rows = await self._db.fetch(LIST_FILE_VIEWS_FIRST_PAGE, org_id, kb_id, limit)
        else:
            rows = await self._db.fetch(LIST_FILE_VIEWS, org_id, kb_id)
        return [view(*r) for r in rows]

    async def get(self, org_id: str, kb_id: int, file_id: str) -> KnowledgeBaseFile | None:
        rows = await self._db.fetch(GET_FILE, org_id, kb_id, uuid.UUID(file_id))
        return _file(rows[0]) if rows else None

    async def delete(self, org_id: str, record_id: int) -> None:
        await self._db.execute(DELETE_FILE, org_id, record_id)

    async def get_by_id(self, org_id: str, record_id: int) -> KnowledgeBaseFile | None:
        rows = await self._db.fetch(GET_FILE_BY_ID, org_id, record_id)
        return _file(rows[0]) if rows else None

    async def begin_attempt(self, org_id: str, record_id: int) -> int:
        (row,) = await self._db.fetch_in_transaction(BEGIN_ATTEMPT, org_id, record_id)
        return int(row[0])

    async def lock_if_chunking(self, org_id: str, record_id: int) -> bool:
        rows = await self._db.fetch_in_transaction(LOCK_IF_CHUNKING, org_id, record_id)
        return bool(rows and rows[0][0])

    async def set_status(
        self, org_id: str, record_id: int, status: ProcessingStatus, error: str | None = None
    ) -> None:
        await self._db.execute(SET_STATUS, org_id, record_id, status.value, error)

    async def set_image_keys(self, org_id: str, record_id: int, keys: list[str]) -> None:
        await self._db.execute(SET_IMAGES, org_id, record_id, keys)

    async def set_ocr_pages(self, org_id: str, record_id: int, pages: int) -> None:
        await self._db.execute(SET_OCR_PAGES, org_id, record_id, pages)

    async def set_extracted_data(
        self, org_id: str, record_id: int, data: dict[str, Any] | None
    ) -> None:
        await self._db.execute(SET_EXTRACTED, org_id, record_id, data)

    async def restart(self, org_id: str, record_id: int) -> None:
        await self._db.execute(RESTART, org_id, record_id)
