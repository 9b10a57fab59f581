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
    Boolean,
    CheckConstraint,
    Computed,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Numeric,
    PrimaryKeyConstraint,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
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


class EmbeddingPartModel(DefaultBase):
    """One part of a large file's passages, embedded by its own job (see migration 0004)."""

    __tablename__ = "embedding_parts"
    __table_args__ = (Index("ix_embedding_parts_file", "file_record_id", "done"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(start=1, increment=1), primary_key=True)
    org_id: Mapped[str] = mapped_column(String(128))
    file_record_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("knowledge_base_files.id", ondelete="CASCADE")
    )
    part: Mapped[int] = mapped_column(Integer)
    models: Mapped[Any] = mapped_column(JsonB)
    passages: Mapped[Any] = mapped_column(JsonB)
    starts: Mapped[int] = mapped_column(Integer, server_default="0")
    done: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))


class StagedChunkModel(DefaultBase):
    """A finished part's passage with its vector, not searchable until the file is published."""

    __tablename__ = "staged_chunks"
    __table_args__ = (
        PrimaryKeyConstraint("part_id", "embedding_model", "chunk_index"),
        Index("ix_staged_chunks_file", "file_record_id"),
    )

    part_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("embedding_parts.id", ondelete="CASCADE")
    )
    org_id: Mapped[str] = mapped_column(String(128))
    file_record_id: Mapped[int] = mapped_column(BigInteger)
    embedding_model: Mapped[str] = mapped_column(String(255))
    dimensions: Mapped[int] = mapped_column(Integer)
    chunk_index: Mapped[int] = mapped_column(Integer)
    page_number: Mapped[int | None] = mapped_column(Integer)
    start_char: Mapped[int] = mapped_column(Integer)
    end_char: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    embedding: Mapped[Any] = mapped_column(Vector())


def _now() -> Any:
    return mapped_column(DateTimeUTC(timezone=True), server_default=func.now())


class AgentTagModel(DefaultBase):
    __tablename__ = "agent_tags"
    __table_args__ = (UniqueConstraint("org_id", "name", name="uq_agent_tags_org_name"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(start=1, increment=1), primary_key=True)
    org_id: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(64))
    color: Mapped[str | None] = mapped_column(String(7))
    created_at: Mapped[dt.datetime] = _now()


class AgentModel(DefaultBase):
    __tablename__ = "agents"
    __table_args__ = (Index("ix_agents_org", "org_id", "id"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(start=1, increment=1), primary_key=True)
    org_id: Mapped[str] = mapped_column(String(128))
    user_id: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, server_default="")
    role: Mapped[str] = mapped_column(Text, server_default="")
    model: Mapped[str] = mapped_column(String(255))
    skill_ids: Mapped[list[int]] = mapped_column(ARRAY(BigInteger), server_default=text("'{}'"))
    created_at: Mapped[dt.datetime] = _now()
    updated_at: Mapped[dt.datetime] = _now()


class AgentKnowledgeBaseModel(DefaultBase):
    __tablename__ = "agent_knowledge_bases"
    __table_args__ = (Index("ix_agent_knowledge_bases_kb", "knowledge_base_id"),)

    org_id: Mapped[str] = mapped_column(String(128))
    agent_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    knowledge_base_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("knowledge_bases.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, server_default="0")


class AgentTagLinkModel(DefaultBase):
    __tablename__ = "agent_tag_links"
    __table_args__ = (Index("ix_agent_tag_links_tag", "tag_id"),)

    org_id: Mapped[str] = mapped_column(String(128))
    agent_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    tag_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("agent_tags.id", ondelete="CASCADE"), primary_key=True
    )


class ConversationModel(DefaultBase):
    __tablename__ = "conversations"
    __table_args__ = (
        Index(
            "ix_conversations_member",
            "org_id",
            "user_id",
            text("updated_at DESC"),
            text("thread_id DESC"),
        ),
        Index("ix_conversations_agent", "agent_id"),
    )

    thread_id: Mapped[uuid.UUID] = mapped_column(SaUuid(as_uuid=True), primary_key=True)
    org_id: Mapped[str] = mapped_column(String(128))
    user_id: Mapped[str] = mapped_column(String(128))
    agent_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("agents.id", ondelete="SET NULL")
    )
    title: Mapped[str | None] = mapped_column(String(120))
    title_source: Mapped[str] = mapped_column(String(16))
    title_version: Mapped[int] = mapped_column(Integer, server_default="0")
    upstream_conversation_id: Mapped[uuid.UUID | None] = mapped_column(SaUuid(as_uuid=True))
    stream_status: Mapped[str | None] = mapped_column(String(16))
    created_at: Mapped[dt.datetime] = _now()
    updated_at: Mapped[dt.datetime] = _now()


class ChatMessageModel(DefaultBase):
    __tablename__ = "chat_messages"
    __table_args__ = (Index("ix_chat_messages_thread", "thread_id", "seq"),)

    id: Mapped[uuid.UUID] = mapped_column(SaUuid(as_uuid=True), primary_key=True)
    org_id: Mapped[str] = mapped_column(String(128))
    thread_id: Mapped[uuid.UUID] = mapped_column(
        SaUuid(as_uuid=True), ForeignKey("conversations.thread_id", ondelete="CASCADE")
    )
    seq: Mapped[int] = mapped_column(BigInteger, Identity(start=1, increment=1))
    role: Mapped[str] = mapped_column(String(16))
    parts: Mapped[list[dict[str, Any]]] = mapped_column(JsonB, server_default=text("'[]'::jsonb"))
    status: Mapped[str | None] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = _now()
    updated_at: Mapped[dt.datetime] = _now()


class ChatRunModel(DefaultBase):
    """One assistant response being produced; its chunks are the stream a client replays."""

    __tablename__ = "chat_runs"
    __table_args__ = (
        Index("ix_chat_runs_thread", "thread_id", text("created_at DESC")),
        Index(
            "ix_chat_runs_running", "heartbeat_at", postgresql_where=text("status = 'in_progress'")
        ),
    )

    id: Mapped[uuid.UUID] = mapped_column(SaUuid(as_uuid=True), primary_key=True)
    org_id: Mapped[str] = mapped_column(String(128))
    thread_id: Mapped[uuid.UUID] = mapped_column(
        SaUuid(as_uuid=True), ForeignKey("conversations.thread_id", ondelete="CASCADE")
    )
    message_id: Mapped[uuid.UUID] = mapped_column(
        SaUuid(as_uuid=True), ForeignKey("chat_messages.id", ondelete="CASCADE")
    )
    status: Mapped[str] = mapped_column(String(16))
    cancel_requested: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    error: Mapped[str | None] = mapped_column(Text)
    chunk_count: Mapped[int] = mapped_column(Integer, server_default="0")
    created_at: Mapped[dt.datetime] = _now()
    heartbeat_at: Mapped[dt.datetime] = _now()
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTimeUTC(timezone=True))


class ChatRunChunkModel(DefaultBase):
    __tablename__ = "chat_run_chunks"
    __table_args__ = (PrimaryKeyConstraint("run_id", "seq"),)

    run_id: Mapped[uuid.UUID] = mapped_column(
        SaUuid(as_uuid=True), ForeignKey("chat_runs.id", ondelete="CASCADE")
    )
    seq: Mapped[int] = mapped_column(Integer)
    org_id: Mapped[str] = mapped_column(String(128))
    chunk: Mapped[dict[str, Any]] = mapped_column(JsonB)


class UsageEventModel(DefaultBase):
    """The usage ledger: one row per model call. Not tied to a conversation by a foreign key,
    so that deleting a conversation never deletes what it cost."""

    __tablename__ = "usage_events"
    __table_args__ = (Index("ix_usage_events_org_time", "org_id", "created_at"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(start=1, increment=1), primary_key=True)
    org_id: Mapped[str] = mapped_column(String(128))
    user_id: Mapped[str | None] = mapped_column(String(128))
    thread_id: Mapped[uuid.UUID | None] = mapped_column(SaUuid(as_uuid=True))
    purpose: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(255))
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    cost_usd: Mapped[Any] = mapped_column(Numeric(18, 8))
    estimated: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    created_at: Mapped[dt.datetime] = _now()
