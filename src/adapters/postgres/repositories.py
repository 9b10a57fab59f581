"""Repositories over the organization-scoped session. Each query also filters by `org_id`:
row-level security is the second wall, not the only one."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import Table, delete, func, insert, literal_column, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncSession

from adapters.postgres.models import (
    KnowledgeBaseFileModel,
    KnowledgeBaseModel,
    MembershipModel,
    OrganizationModel,
)
from domain.errors import Conflict
from domain.files import TERMINAL_STATUSES, KnowledgeBaseFile, NewFile, ProcessingStatus
from domain.identity import Identity
from domain.knowledge_bases import KnowledgeBase, KnowledgeBaseSummary, NewKnowledgeBase

KB = cast(Table, KnowledgeBaseModel.__table__)
FILES = cast(Table, KnowledgeBaseFileModel.__table__)
ORGANIZATIONS = cast(Table, OrganizationModel.__table__)
MEMBERSHIPS = cast(Table, MembershipModel.__table__)
_KB_FIELDS = (
    "name",
    "description",
    "embedding_model",
    "embedding_dimensions",
    "extraction_model",
    "extraction_schema",
    "source",
    "trigger",
    "pending_embedding_model",
    "pending_embedding_dimensions",
    "reindex_error",
)


def _now() -> datetime:
    return datetime.now(UTC)


def _kb(row: RowMapping) -> KnowledgeBase:
    return KnowledgeBase(
        id=row["id"],
        org_id=row["org_id"],
        user_id=row["user_id"],
        name=row["name"],
        description=row["description"],
        embedding_model=row["embedding_model"],
        embedding_dimensions=row["embedding_dimensions"],
        extraction_model=row["extraction_model"],
        extraction_schema=row["extraction_schema"],
        source=row["source"],
        trigger=row["trigger"],
        pending_embedding_model=row["pending_embedding_model"],
        pending_embedding_dimensions=row["pending_embedding_dimensions"],
        reindex_error=row["reindex_error"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _file(row: RowMapping) -> KnowledgeBaseFile:
    return KnowledgeBaseFile(
        id=row["id"],
        org_id=row["org_id"],
        knowledge_base_id=row["knowledge_base_id"],
        file_id=str(row["file_id"]),
        file_name=row["file_name"],
        file_key=row["file_key"],
        content_key=row["content_key"],
        content_type=row["content_type"],
        file_size=row["file_size"],
        processing_status=ProcessingStatus(row["processing_status"]),
        processing_error=row["processing_error"],
        image_keys=row["image_keys"],
        user_metadata=row["user_metadata"],
        extracted_data=row["extracted_data"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


class SqlaKnowledgeBaseRepository:
    """`KnowledgeBaseRepository` in Postgres."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def add(self, new: NewKnowledgeBase) -> KnowledgeBase:
        now = _now()
        stmt = (
            insert(KB)
            .values(
                org_id=new.org_id,
                user_id=new.user_id,
                name=new.name,
                description=new.description,
                embedding_model=new.embedding_model,
                embedding_dimensions=new.embedding_dimensions,
                extraction_model=new.extraction_model,
                extraction_schema=new.extraction_schema,
                created_at=now,
                updated_at=now,
            )
            .returning(*KB.c)
        )
        return _kb((await self._session.execute(stmt)).mappings().one())

    async def get(
        self, org_id: str, kb_id: int, *, for_update: bool = False
    ) -> KnowledgeBase | None:
        stmt = select(KB).where(KB.c.org_id == org_id, KB.c.id == kb_id)
        if for_update:
            stmt = stmt.with_for_update()
        row = (await self._session.execute(stmt)).mappings().one_or_none()
        return _kb(row) if row else None

    def _summaries(self, org_id: str) -> Any:
        in_progress = func.count().filter(
            FILES.c.processing_status.not_in([s.value for s in TERMINAL_STATUSES])
        )
        figures = (
            select(
                FILES.c.knowledge_base_id,
                func.count().label("file_count"),
                func.coalesce(func.sum(FILES.c.file_size), 0).label("total_size"),
                func.max(FILES.c.created_at).label("last_file_uploaded_at"),
                in_progress.label("files_in_progress"),
            )
            .where(FILES.c.org_id == org_id)
            .group_by(FILES.c.knowledge_base_id)
            .subquery()
        )
        return (
            select(
                KB,
                func.coalesce(figures.c.file_count, 0).label("file_count"),
                func.coalesce(figures.c.total_size, 0).label("total_size"),
                figures.c.last_file_uploaded_at,
                func.coalesce(figures.c.files_in_progress, 0).label("files_in_progress"),
            )
            .outerjoin(figures, figures.c.knowledge_base_id == KB.c.id)
            .where(KB.c.org_id == org_id)
        )

    @staticmethod
    def _summary(row: RowMapping) -> KnowledgeBaseSummary:
        return KnowledgeBaseSummary(
            knowledge_base=_kb(row),
            file_count=int(row["file_count"]),
            total_size=int(row["total_size"]),
            last_file_uploaded_at=row["last_file_uploaded_at"],
            files_in_progress=int(row["files_in_progress"]),
        )

    async def list_summaries(self, org_id: str) -> list[KnowledgeBaseSummary]:
        stmt = self._summaries(org_id).order_by(KB.c.created_at.desc(), KB.c.id.desc())
        return [self._summary(r) for r in (await self._session.execute(stmt)).mappings()]

    async def get_summary(self, org_id: str, kb_id: int) -> KnowledgeBaseSummary | None:
        stmt = self._summaries(org_id).where(KB.c.id == kb_id)
        row = (await self._session.execute(stmt)).mappings().one_or_none()
        return self._summary(row) if row else None

    async def update(self, org_id: str, kb_id: int, changes: Mapping[str, Any]) -> KnowledgeBase:
        unknown = set(changes) - set(_KB_FIELDS)
        if unknown:
            raise ValueError(f"not updatable: {sorted(unknown)}")
        stmt = (
            update(KB)
            .where(KB.c.org_id == org_id, KB.c.id == kb_id)
            .values(**changes, updated_at=_now())
            .returning(*KB.c)
        )
        return _kb((await self._session.execute(stmt)).mappings().one())

    async def delete(self, org_id: str, kb_id: int) -> None:
        await self._session.execute(delete(KB).where(KB.c.org_id == org_id, KB.c.id == kb_id))


class SqlaFileRepository:
    """`FileRepository` in Postgres."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def add(self, new: NewFile) -> KnowledgeBaseFile:
        now = _now()
        stmt = (
            pg_insert(FILES)
            .values(
                org_id=new.org_id,
                knowledge_base_id=new.knowledge_base_id,
                file_id=uuid.UUID(new.file_id),
                file_name=new.file_name,
                file_key=new.file_key,
                content_key=new.content_key,
                content_type=new.content_type,
                file_size=new.file_size,
                processing_status=ProcessingStatus.PARSING.value,
                user_metadata=new.user_metadata,
                created_at=now,
                updated_at=now,
            )
            .on_conflict_do_nothing(constraint="uq_knowledge_base_files_org_file")
            .returning(*FILES.c)
        )
        row = (await self._session.execute(stmt)).mappings().one_or_none()
        if row is None:
            raise Conflict("This file is already associated with a knowledge base")
        return _file(row)

    async def list_for_knowledge_base(self, org_id: str, kb_id: int) -> list[KnowledgeBaseFile]:
        stmt = (
            select(FILES)
            .where(FILES.c.org_id == org_id, FILES.c.knowledge_base_id == kb_id)
            .order_by(FILES.c.created_at.desc(), FILES.c.id.desc())
        )
        return [_file(r) for r in (await self._session.execute(stmt)).mappings()]

    async def get(self, org_id: str, kb_id: int, file_id: str) -> KnowledgeBaseFile | None:
        stmt = select(FILES).where(
            FILES.c.org_id == org_id,
            FILES.c.knowledge_base_id == kb_id,
            FILES.c.file_id == uuid.UUID(file_id),
        )
        row = (await self._session.execute(stmt)).mappings().one_or_none()
        return _file(row) if row else None

    async def delete(self, org_id: str, record_id: int) -> None:
        await self._session.execute(
            delete(FILES).where(FILES.c.org_id == org_id, FILES.c.id == record_id)
        )


class SqlaMemberDirectory:
    """`MemberDirectory` in Postgres: upserts of the organization and the membership."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def record_seen(self, identity: Identity, seen_at: datetime) -> None:
        assert identity.org_id
        orgs, members = ORGANIZATIONS, MEMBERSHIPS
        await self._session.execute(
            pg_insert(orgs)
            .values(org_id=identity.org_id, settings={}, created_at=seen_at, updated_at=seen_at)
            .on_conflict_do_nothing(index_elements=["org_id"])
        )
        excluded = pg_insert(members).excluded
        stmt = pg_insert(members).values(
            org_id=identity.org_id,
            user_id=identity.user_id,
            email=identity.email,
            first_name=identity.first_name,
            last_name=identity.last_name,
            role=identity.role or "org:member",
            public_metadata={},
            last_sign_in_at=seen_at,
            created_at=seen_at,
            updated_at=seen_at,
        )
        await self._session.execute(
            stmt.on_conflict_do_update(
                index_elements=["org_id", "user_id"],
                set_={
                    "email": func.coalesce(excluded.email, members.c.email),
                    "first_name": func.coalesce(excluded.first_name, members.c.first_name),
                    "last_name": func.coalesce(excluded.last_name, members.c.last_name),
                    "role": excluded.role,
                    "last_sign_in_at": excluded.last_sign_in_at,
                    "updated_at": literal_column("now()"),
                },
            )
        )
