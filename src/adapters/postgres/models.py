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
from sqlalchemy import (
    BigInteger,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy import Uuid as SaUuid
from sqlalchemy.dialects.postgresql import ARRAY
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
