"""Tool servers: an organization's MCP servers and OpenAPI-described HTTP APIs (migration
0024)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from advanced_alchemy.mixins import IdentityPrimaryKey
from advanced_alchemy.types import DateTimeUTC, JsonB
from sqlalchemy import Boolean, Index, LargeBinary, String, Text, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, Timestamps, org_column


class ToolServerModel(IdentityPrimaryKey, Timestamps, Base):
    """A tool server: its header values only sealed (`sealed_headers`), what its last refresh
    found in `tools`, `status` and `error`."""

    __tablename__ = "tool_servers"
    __table_args__ = (Index("ux_tool_servers_org_name", "org_id", "name", unique=True),)

    org_id: Mapped[str] = org_column()
    user_id: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(64, collation="C"))
    kind: Mapped[str] = mapped_column(String(16))
    url: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text)
    header_names: Mapped[list[str]] = mapped_column(ARRAY(Text))
    sealed_headers: Mapped[bytes | None] = mapped_column(LargeBinary)
    require_approval: Mapped[Any] = mapped_column(JsonB)
    enabled: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    tools: Mapped[list[dict[str, Any]]] = mapped_column(JsonB, server_default=text("'[]'::jsonb"))
    refreshed_at: Mapped[dt.datetime | None] = mapped_column(DateTimeUTC(timezone=True))
