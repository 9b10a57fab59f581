"""Organizations and their members (migrations 0001, 0018)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from advanced_alchemy.types import DateTimeUTC, JsonB
from sqlalchemy import ForeignKey, String, text
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, Timestamps

EMPTY_OBJECT = text("'{}'::jsonb")


class OrganizationModel(Timestamps, Base):
    __tablename__ = "organizations"

    org_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    settings: Mapped[dict[str, Any]] = mapped_column(JsonB, server_default=EMPTY_OBJECT)


class MembershipModel(Timestamps, Base):
    __tablename__ = "memberships"

    org_id: Mapped[str] = mapped_column(
        String(128), ForeignKey("organizations.org_id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    email: Mapped[str | None] = mapped_column(String(320))
    first_name: Mapped[str | None] = mapped_column(String(200))
    last_name: Mapped[str | None] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(64))
    # The role the member's last token claimed (migration 0018).
    claimed_role: Mapped[str | None] = mapped_column(String(64))
    public_metadata: Mapped[dict[str, Any]] = mapped_column(JsonB, server_default=EMPTY_OBJECT)
    last_sign_in_at: Mapped[dt.datetime | None] = mapped_column(DateTimeUTC(timezone=True))
