"""Agents, their tags and the knowledge bases they search (migrations 0003, 0023), and the
tool servers' tools they may call (0024)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from advanced_alchemy.mixins import IdentityPrimaryKey
from advanced_alchemy.types import JsonB
from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, Timestamps, now, org_column


class AgentTagModel(IdentityPrimaryKey, Base):
    __tablename__ = "agent_tags"
    __table_args__ = (UniqueConstraint("org_id", "name", name="uq_agent_tags_org_name"),)

    org_id: Mapped[str] = org_column()
    name: Mapped[str] = mapped_column(String(64))
    color: Mapped[str | None] = mapped_column(String(7))
    created_at: Mapped[dt.datetime] = now()


class AgentModel(IdentityPrimaryKey, Timestamps, Base):
    __tablename__ = "agents"
    __table_args__ = (Index("ix_agents_org", "org_id", "id"),)

    org_id: Mapped[str] = org_column()
    user_id: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, server_default="")
    role: Mapped[str] = mapped_column(Text, server_default="")
    model: Mapped[str] = mapped_column(String(255))
    skill_ids: Mapped[list[int]] = mapped_column(ARRAY(BigInteger), server_default=text("'{}'"))
    knowledge_filters: Mapped[dict[str, Any] | None] = mapped_column(JsonB)
    tools: Mapped[list[dict[str, Any]]] = mapped_column(JsonB, server_default=text("'[]'::jsonb"))


class AgentKnowledgeBaseModel(Base):
    __tablename__ = "agent_knowledge_bases"
    __table_args__ = (Index("ix_agent_knowledge_bases_kb", "knowledge_base_id"),)

    org_id: Mapped[str] = org_column()
    agent_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    knowledge_base_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("knowledge_bases.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, server_default="0")


class AgentTagLinkModel(Base):
    __tablename__ = "agent_tag_links"
    __table_args__ = (Index("ix_agent_tag_links_tag", "tag_id"),)

    org_id: Mapped[str] = org_column()
    agent_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    tag_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("agent_tags.id", ondelete="CASCADE"), primary_key=True
    )
