"""Organization settings, the daily roll-up of the usage ledger and spend reservations
(migration 0009). The roll-up's trigger and `ap_reserve_spend` are SQL functions, not declared
here."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

from advanced_alchemy.types import DateTimeUTC, JsonB
from sqlalchemy import Date, Index, Integer, Numeric, String, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, now, org_column


class OrgSettingsModel(Base):
    """An organization's saved settings, one JSON object replaced whole."""

    __tablename__ = "org_settings"

    org_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    settings: Mapped[dict[str, Any]] = mapped_column(JsonB)
    updated_by: Mapped[str | None] = mapped_column(String(128))
    updated_at: Mapped[dt.datetime] = now()


class UsageDailyModel(Base):
    """What an organization's model calls cost per UTC day, kept by a trigger on the ledger."""

    __tablename__ = "usage_daily"

    org_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    day: Mapped[dt.date] = mapped_column(Date, primary_key=True)
    cost_usd: Mapped[Decimal] = mapped_column(Numeric(18, 8))


class SpendReservationModel(Base):
    """The worst-case cost of a model call under way, until it settles or expires."""

    __tablename__ = "spend_reservations"
    __table_args__ = (Index("ix_spend_reservations_org_expiry", "org_id", "expires_at"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    org_id: Mapped[str] = org_column()
    amount_usd: Mapped[Decimal] = mapped_column(Numeric(18, 8))
    created_at: Mapped[dt.datetime] = now()
    expires_at: Mapped[dt.datetime] = mapped_column(DateTimeUTC(timezone=True))
    # The call it stands for, which the reaper charges if its process dies (migration 0020).
    user_id: Mapped[str | None] = mapped_column(String(128))
    thread_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    purpose: Mapped[str | None] = mapped_column(String(32))
    model: Mapped[str | None] = mapped_column(String(255))
    input_tokens: Mapped[int] = mapped_column(Integer, server_default="0")
    run_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    text_offset: Mapped[int] = mapped_column(Integer, server_default="0")
