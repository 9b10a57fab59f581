"""Invitations, membership removals, the audit log and webhook receipts (migration 0007)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from advanced_alchemy.mixins import IdentityPrimaryKey
from advanced_alchemy.types import DateTimeUTC, JsonB
from sqlalchemy import CheckConstraint, Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, now, org_column

INVITATION_STATUSES = ("pending", "accepted", "revoked", "expired")


class MembershipRemovalModel(Base):
    """When a user was last removed from an organization: their older tokens are refused."""

    __tablename__ = "membership_removals"

    org_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    removed_at: Mapped[dt.datetime] = mapped_column(DateTimeUTC(timezone=True))


class InvitationModel(Base):
    """An invitation of the local directory; at most one pending per e-mail (any case)."""

    __tablename__ = "invitations"
    __table_args__ = (
        CheckConstraint(f"status IN {INVITATION_STATUSES!r}", name="ck_invitations_status"),
        Index(
            "ux_invitations_pending_email",
            "org_id",
            text("lower(email)"),
            unique=True,
            postgresql_where=text("status = 'pending'"),
        ),
        Index("ix_invitations_org_created", "org_id", text("created_at DESC")),
    )

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    org_id: Mapped[str] = org_column()
    email: Mapped[str] = mapped_column(String(320))
    role: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    inviter_user_id: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[dt.datetime] = now()
    expires_at: Mapped[dt.datetime] = mapped_column(DateTimeUTC(timezone=True))
    accepted_at: Mapped[dt.datetime | None] = mapped_column(DateTimeUTC(timezone=True))
    accepted_user_id: Mapped[str | None] = mapped_column(String(128))
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTimeUTC(timezone=True))


class AuditLogModel(IdentityPrimaryKey, Base):
    """One administrative change of an organization; append-only, read newest first."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_org", "org_id", text("id DESC")),)

    org_id: Mapped[str] = org_column()
    at: Mapped[dt.datetime] = now()
    actor_user_id: Mapped[str | None] = mapped_column(String(128))
    action: Mapped[str] = mapped_column(String(64))
    target_type: Mapped[str] = mapped_column(String(64))
    target_id: Mapped[str] = mapped_column(Text)
    details: Mapped[dict[str, Any]] = mapped_column(JsonB, server_default=text("'{}'::jsonb"))


class WebhookReceiptModel(Base):
    """A webhook message already received. No `org_id` and no row-level security: message ids
    are global and the table holds no tenant data."""

    __tablename__ = "webhook_receipts"
    __table_args__ = (Index("ix_webhook_receipts_received", "received_at"),)

    message_id: Mapped[str] = mapped_column(Text, primary_key=True)
    received_at: Mapped[dt.datetime] = mapped_column(DateTimeUTC(timezone=True))
