"""Conversations, their messages, the runs producing assistant responses with the chunks of
their streams, and the usage ledger (migration 0003)."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

from advanced_alchemy.mixins import IdentityPrimaryKey
from advanced_alchemy.types import DateTimeUTC, JsonB
from sqlalchemy import (
    BigInteger,
    Boolean,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Numeric,
    PrimaryKeyConstraint,
    String,
    Text,
    Uuid,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, Timestamps, now, org_column


class ConversationModel(Timestamps, Base):
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

    thread_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    org_id: Mapped[str] = org_column()
    user_id: Mapped[str] = mapped_column(String(128))
    agent_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("agents.id", ondelete="SET NULL")
    )
    title: Mapped[str | None] = mapped_column(String(120))
    title_source: Mapped[str] = mapped_column(String(16))
    title_version: Mapped[int] = mapped_column(Integer, server_default="0")
    upstream_conversation_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    stream_status: Mapped[str | None] = mapped_column(String(32))


class ChatMessageModel(Timestamps, Base):
    __tablename__ = "chat_messages"
    __table_args__ = (Index("ix_chat_messages_thread", "thread_id", "seq"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    org_id: Mapped[str] = org_column()
    thread_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("conversations.thread_id", ondelete="CASCADE")
    )
    seq: Mapped[int] = mapped_column(BigInteger, Identity(start=1, increment=1))
    role: Mapped[str] = mapped_column(String(16))
    parts: Mapped[list[dict[str, Any]]] = mapped_column(JsonB, server_default=text("'[]'::jsonb"))
    status: Mapped[str | None] = mapped_column(String(32))
    error: Mapped[str | None] = mapped_column(Text)


class ChatRunModel(Base):
    """One assistant response being produced; its chunks are the stream a client replays."""

    __tablename__ = "chat_runs"
    __table_args__ = (
        Index("ix_chat_runs_thread", "thread_id", text("created_at DESC")),
        Index(
            "ix_chat_runs_running", "heartbeat_at", postgresql_where=text("status = 'in_progress'")
        ),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    org_id: Mapped[str] = org_column()
    thread_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("conversations.thread_id", ondelete="CASCADE")
    )
    message_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("chat_messages.id", ondelete="CASCADE")
    )
    status: Mapped[str] = mapped_column(String(32))
    cancel_requested: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    error: Mapped[str | None] = mapped_column(Text)
    chunk_count: Mapped[int] = mapped_column(Integer, server_default="0")
    created_at: Mapped[dt.datetime] = now()
    heartbeat_at: Mapped[dt.datetime] = now()
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTimeUTC(timezone=True))


class ChatRunChunkModel(Base):
    __tablename__ = "chat_run_chunks"
    __table_args__ = (PrimaryKeyConstraint("run_id", "seq"),)

    run_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("chat_runs.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    org_id: Mapped[str] = org_column()
    chunk: Mapped[dict[str, Any]] = mapped_column(JsonB)


class UsageEventModel(IdentityPrimaryKey, Base):
    """The usage ledger: one row per model call. Not tied to a conversation by a foreign key,
    so that deleting a conversation never deletes what it cost."""

    __tablename__ = "usage_events"
    __table_args__ = (Index("ix_usage_events_org_time", "org_id", "created_at"),)

    org_id: Mapped[str] = org_column()
    user_id: Mapped[str | None] = mapped_column(String(128))
    thread_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    purpose: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(255))
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    cost_usd: Mapped[Decimal] = mapped_column(Numeric(18, 8))
    estimated: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    created_at: Mapped[dt.datetime] = now()
