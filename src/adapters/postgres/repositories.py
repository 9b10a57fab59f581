"""Repositories on an organization-scoped asyncpg connection.

Each statement also filters by `org_id`: row-level security is the second wall, not the only
one. Statements are fixed strings built once from column lists, so every value is a bound
parameter and asyncpg keeps them prepared; rows are read by position.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import fields
from datetime import datetime
from typing import Any

from adapters.postgres.database import OrgConnection
from adapters.postgres.members import invitation
from application.ports.file_repository import View
from domain.errors import Conflict
from domain.files import (
    FILE_VIEW_FIELDS,
    FileCursor,
    KnowledgeBaseFile,
    NewFile,
    ProcessingStatus,
)
from domain.identity import MEMBER_ROLE, Identity
from domain.knowledge_bases import KnowledgeBase, KnowledgeBaseSummary, NewKnowledgeBase
from domain.members import Invitation

KB_ORDER = (
    "id", "org_id", "user_id", "name", "description", "embedding_model", "embedding_dimensions",
    "extraction_model", "extraction_schema", "source", "trigger", "pending_embedding_model",
    "pending_embedding_dimensions", "reindex_error", "created_at", "updated_at", "chunk_size",
    "chunk_overlap", "inbound_email_address",
)  # fmt: skip
FILE_ORDER = (
    "id", "org_id", "knowledge_base_id", "file_id", "file_name", "file_key", "content_key",
    "content_type", "file_size", "processing_status", "processing_error", "image_keys",
    "user_metadata", "extracted_data", "created_at", "updated_at",
)  # fmt: skip
UPDATABLE_KB_FIELDS = frozenset(KB_ORDER) - {"id", "org_id", "user_id", "created_at", "updated_at"}
KB_COLUMNS = ", ".join(f"kb.{name}" for name in KB_ORDER)
KB_RETURNING = ", ".join(KB_ORDER)


def _file_column(name: str, table: str = "f.") -> str:
    return f"{table}{name}::text" if name == "file_id" else f"{table}{name}"


FILE_COLUMNS = ", ".join(map(_file_column, FILE_ORDER))
FILE_RETURNING = ", ".join(_file_column(name, table="") for name in FILE_ORDER)

# Totals come from `knowledge_base_stats`, kept by a trigger as files change (migration 0013),
# so a listing reads one row per knowledge base however many files it holds.
SUMMARIES = f"""
    SELECT {KB_COLUMNS}, coalesce(st.file_count, 0), coalesce(st.total_size, 0),
           st.last_file_uploaded_at, coalesce(st.files_in_progress, 0)
    FROM knowledge_bases kb
    LEFT JOIN knowledge_base_stats st ON st.knowledge_base_id = kb.id AND st.org_id = $1
    WHERE kb.org_id = $1"""
LIST_SUMMARIES = SUMMARIES + " ORDER BY kb.created_at DESC, kb.id DESC"
GET_SUMMARY = SUMMARIES + " AND kb.id = $2"
GET_KB = f"SELECT {KB_COLUMNS} FROM knowledge_bases kb WHERE kb.org_id = $1 AND kb.id = $2"
INSERT_KB = f"""
    INSERT INTO knowledge_bases (org_id, user_id, name, description, embedding_model,
        embedding_dimensions, extraction_model, extraction_schema, chunk_size, chunk_overlap,
        source, inbound_email_address)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
    RETURNING {KB_RETURNING}"""
DELETE_KB = "DELETE FROM knowledge_bases WHERE org_id = $1 AND id = $2"
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
SET_EXTRACTED = """
    UPDATE knowledge_base_files SET extracted_data = $3, updated_at = now()
    WHERE org_id = $1 AND id = $2"""
RESTART = """
    UPDATE knowledge_base_files SET processing_status = 'parsing', processing_error = NULL,
        processing_attempts = 0, updated_at = now()
    WHERE org_id = $1 AND id = $2"""
UPSERT_ORGANIZATION = """
    INSERT INTO organizations (org_id, created_at, updated_at) VALUES ($1, $2, $2)
    ON CONFLICT (org_id) DO NOTHING"""
FORGET_MEMBERSHIP = "DELETE FROM memberships WHERE org_id = $1 AND user_id = $2 RETURNING user_id"
UPSERT_MEMBERSHIP = """
    INSERT INTO memberships (org_id, user_id, email, first_name, last_name, role,
        last_sign_in_at, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $7)
    ON CONFLICT (org_id, user_id) DO UPDATE SET
        email = coalesce(excluded.email, memberships.email),
        first_name = coalesce(excluded.first_name, memberships.first_name),
        last_name = coalesce(excluded.last_name, memberships.last_name),
        role = excluded.role,
        last_sign_in_at = excluded.last_sign_in_at,
        updated_at = excluded.updated_at"""
# The invitation becomes accepted and the member takes its role, whether `record_seen` made
# the membership already or does so after; the organization is made too if it is new, as the
# membership refers to it.
ACCEPT_INVITATION = """
    WITH accepted AS (
        UPDATE invitations SET status = 'accepted', accepted_at = $3, accepted_user_id = $2
        WHERE org_id = $1 AND lower(email) = lower($4) AND status = 'pending' AND expires_at > $3
        RETURNING id, email, role, status, inviter_user_id, created_at, expires_at
    ), organization AS (
        INSERT INTO organizations (org_id, created_at, updated_at)
        SELECT $1, $3, $3 FROM accepted ON CONFLICT (org_id) DO NOTHING
    ), member AS (
        INSERT INTO memberships (org_id, user_id, email, first_name, last_name, role,
            last_sign_in_at, created_at, updated_at)
        SELECT $1, $2, $4, $5, $6, a.role, $3, $3, $3 FROM accepted a
        ON CONFLICT (org_id, user_id) DO UPDATE SET
            role = excluded.role, updated_at = excluded.updated_at
    )
    SELECT * FROM accepted"""
_STATUS = {status.value: status for status in ProcessingStatus}


# Rows are read by position straight into the entities, whose fields are in column order
# (checked below): keyword calls cost several times as much, per row of a listing.
def _kb(r: Any) -> KnowledgeBase:
    return KnowledgeBase(*r[:19])


def _file(r: Any) -> KnowledgeBaseFile:
    return KnowledgeBaseFile(*(*r[:9], _STATUS[r[9]], *r[10:16]))


def _summary(r: Any) -> KnowledgeBaseSummary:
    return KnowledgeBaseSummary(*r[:23])


def _check_column_order() -> None:
    totals = ("file_count", "total_size", "last_file_uploaded_at", "files_in_progress")
    for entity, order in (
        (KnowledgeBase, KB_ORDER),
        (KnowledgeBaseSummary, KB_ORDER + totals),
        (KnowledgeBaseFile, FILE_ORDER),
    ):
        names = tuple(field.name for field in fields(entity))
        if names != order:
            raise TypeError(f"{entity.__name__} fields {names} are not the columns {order}")
    if tuple(name for name in FILE_ORDER if name != "org_id") != FILE_VIEW_FIELDS:
        raise TypeError(
            f"FILE_VIEW_FIELDS {FILE_VIEW_FIELDS} are not KnowledgeBaseFile's fields without org_id"
        )


_check_column_order()


class PgKnowledgeBaseRepository:
    """`KnowledgeBaseRepository` in Postgres."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def add(self, new: NewKnowledgeBase) -> KnowledgeBase:
        (row,) = await self._db.fetch_in_transaction(
            INSERT_KB, new.org_id, new.user_id, new.name, new.description, new.embedding_model,
            new.embedding_dimensions, new.extraction_model, new.extraction_schema, new.chunk_size,
            new.chunk_overlap, new.source, new.inbound_email_address,
        )  # fmt: skip
        return _kb(row)

    async def get(
        self, org_id: str, kb_id: int, *, for_update: bool = False, for_share: bool = False
    ) -> KnowledgeBase | None:
        if for_update or for_share:
            lock = " FOR UPDATE" if for_update else " FOR SHARE"
            rows = await self._db.fetch_in_transaction(GET_KB + lock, org_id, kb_id)
        else:
            rows = await self._db.fetch(GET_KB, org_id, kb_id)
        return _kb(rows[0]) if rows else None

    async def list_summaries(self, org_id: str) -> list[KnowledgeBaseSummary]:
        return [_summary(r) for r in await self._db.fetch(LIST_SUMMARIES, org_id)]

    async def get_summary(self, org_id: str, kb_id: int) -> KnowledgeBaseSummary | None:
        rows = await self._db.fetch(GET_SUMMARY, org_id, kb_id)
        return _summary(rows[0]) if rows else None

    async def update(self, org_id: str, kb_id: int, changes: Mapping[str, Any]) -> KnowledgeBase:
        unknown = set(changes) - UPDATABLE_KB_FIELDS
        if unknown:
            raise ValueError(f"not updatable: {sorted(unknown)}")
        names = list(changes)
        assignments = ", ".join(f"{name} = ${i}" for i, name in enumerate(names, start=3))
        sql = (
            f"UPDATE knowledge_bases SET {assignments}, updated_at = now() "
            f"WHERE org_id = $1 AND id = $2 RETURNING {KB_RETURNING}"
        )
        (row,) = await self._db.fetch_in_transaction(sql, org_id, kb_id, *changes.values())
        return _kb(row)

    async def delete(self, org_id: str, kb_id: int) -> None:
        await self._db.execute(DELETE_KB, org_id, kb_id)


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
            raise Conflict("This file is already associated with a knowledge base")
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

    async def set_extracted_data(
        self, org_id: str, record_id: int, data: dict[str, Any] | None
    ) -> None:
        await self._db.execute(SET_EXTRACTED, org_id, record_id, data)

    async def restart(self, org_id: str, record_id: int) -> None:
        await self._db.execute(RESTART, org_id, record_id)


class PgMemberDirectory:
    """`MemberDirectory` in Postgres: upserts of the organization and the membership, and the
    acceptance of a pending invitation of the local directory."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def record_seen(self, identity: Identity, seen_at: datetime) -> None:
        assert identity.org_id
        await self._db.execute(UPSERT_ORGANIZATION, identity.org_id, seen_at)
        await self._db.execute(
            UPSERT_MEMBERSHIP, identity.org_id, identity.user_id, identity.email,
            identity.first_name, identity.last_name, identity.role or MEMBER_ROLE, seen_at,
        )  # fmt: skip

    async def forget(self, org_id: str, user_id: str) -> bool:
        return bool(await self._db.fetch_in_transaction(FORGET_MEMBERSHIP, org_id, user_id))

    async def accept_invitation(self, identity: Identity, at: datetime) -> Invitation | None:
        if not identity.org_id or not identity.email:
            return None
        rows = await self._db.fetch_in_transaction(
            ACCEPT_INVITATION, identity.org_id, identity.user_id, at, identity.email,
            identity.first_name, identity.last_name,
        )  # fmt: skip
        return invitation(rows[0]) if rows else None
