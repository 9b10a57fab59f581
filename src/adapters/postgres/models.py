"""The schema's declaration as advanced-alchemy models. Every table carries `org_id`, which
row-level security filters on. The migrations create this schema (a test compares the two);
the request path reads and writes it with SQL on asyncpg (see `repositories`)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from advanced_alchemy.base import DefaultBase, IdentityAuditBase
from advanced_alchemy.mixins import AuditColumns
from advanced_alchemy.types import DateTimeUTC, JsonB
from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Computed,
    ForeignKey,
    Identity,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy import Uuid as SaUuid
from sqlalchemy.dialects.postgresql import ARRAY, TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column


class OrganizationModel(DefaultBase, AuditColumns):
    __tablename__ = "organizations"

    org_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    settings: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)


class MembershipModel(DefaultBase, AuditColumns):
    __tablename__ = "memberships"

    org_id: Mapped[str] = mapped_column(
        String(128), ForeignKey("organizations.org_id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    email: Mapped[str | None] = mapped_column(String(320))
    first_name: Mapped[str | None] = mapped_column(String(200))
    last_name: Mapped[str | None] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(64))
    public_metadata: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)
    last_sign_in_at: Mapped[dt.datetime | None] = mapped_column(DateTimeUTC(timezone=True))


class KnowledgeBaseModel(IdentityAuditBase):
    __tablename__ = "knowledge_bases"
    __table_args__ = (Index("ix_knowledge_bases_org", "org_id", "id"),)

    org_id: Mapped[str] = mapped_column(String(128))
    user_id: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    embedding_model: Mapped[str] = mapped_column(String(255))
    embedding_dimensions: Mapped[int] = mapped_column(Integer)
    extraction_model: Mapped[str | None] = mapped_column(String(255))
    extraction_schema: Mapped[dict[str, Any] | None] = mapped_column(JsonB)
    source: Mapped[dict[str, Any] | None] = mapped_column(JsonB)
    trigger: Mapped[dict[str, Any] | None] = mapped_column(JsonB)
    pending_embedding_model: Mapped[str | None] = mapped_column(String(255))
    pending_embedding_dimensions: Mapped[int | None] = mapped_column(Integer)
    reindex_error: Mapped[str | None] = mapped_column(Text)
    chunk_size: Mapped[int] = mapped_column(Integer, server_default="256")
    chunk_overlap: Mapped[int] = mapped_column(Integer, server_default="32")


class KnowledgeBaseFileModel(IdentityAuditBase):
    __tablename__ = "knowledge_base_files"
    __table_args__ = (
        UniqueConstraint("org_id", "file_id", name="uq_knowledge_base_files_org_file"),
        Index("ix_knowledge_base_files_kb", "org_id", "knowledge_base_id", "created_at"),
    )

    org_id: Mapped[str] = mapped_column(String(128))
    knowledge_base_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("knowledge_bases.id", ondelete="CASCADE")
    )
    file_id: Mapped[uuid.UUID] = mapped_column(SaUuid(as_uuid=True))
    file_name: Mapped[str] = mapped_column(String(255))
    file_key: Mapped[str] = mapped_column(String(1024))
    content_key: Mapped[str] = mapped_column(String(1024))
    content_type: Mapped[str] = mapped_column(String(255))
    file_size: Mapped[int | None] = mapped_column(BigInteger)
    processing_status: Mapped[str] = mapped_column(String(32))
    processing_error: Mapped[str | None] = mapped_column(Text)
    image_keys: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    user_metadata: Mapped[dict[str, Any] | None] = mapped_column(JsonB)
    extracted_data: Mapped[dict[str, Any] | None] = mapped_column(JsonB)
    processing_attempts: Mapped[int] = mapped_column(Integer, server_default="0")


class ChunkModel(DefaultBase):
    """A passage of a file with its embedding. `embedding` has no fixed dimension count: each
    count has its own partial HNSW index (see migration 0002)."""

    __tablename__ = "chunks"
    __table_args__ = (
        Index("ix_chunks_scope", "org_id", "knowledge_base_id", "embedding_model"),
        Index("ix_chunks_file", "file_record_id", "embedding_model"),
        Index("ix_chunks_tsv", "tsv", postgresql_using="gin"),
        CheckConstraint("vector_dims(embedding) = dimensions", name="ck_chunks_dimensions"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(start=1, increment=1), primary_key=True)
    org_id: Mapped[str] = mapped_column(String(128))
    knowledge_base_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("knowledge_bases.id", ondelete="CASCADE")
    )
    file_record_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("knowledge_base_files.id", ondelete="CASCADE")
    )
    embedding_model: Mapped[str] = mapped_column(String(255))
    dimensions: Mapped[int] = mapped_column(Integer)
    chunk_index: Mapped[int] = mapped_column(Integer)
    page_number: Mapped[int | None] = mapped_column(Integer)
    start_char: Mapped[int] = mapped_column(Integer)
    end_char: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    embedding: Mapped[Any] = mapped_column(Vector())
    tsv: Mapped[Any] = mapped_column(
        TSVECTOR, Computed("to_tsvector('simple', text)", persisted=True)
    )
    created_at: Mapped[dt.datetime] = mapped_column(
        DateTimeUTC(timezone=True), server_default=func.now()
    )
