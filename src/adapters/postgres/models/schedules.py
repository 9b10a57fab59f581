"""Scheduled tasks and their runs (migration 0011). The due-task read and the reaper are SQL
functions, not declared here."""

from __future__ import annotations

import datetime as dt
import uuid

from advanced_alchemy.mixins import IdentityPrimaryKey
from advanced_alchemy.types import DateTimeUTC
from sqlalchemy import BigInteger, Boolean, CheckConstraint, Index, String, Text, Uuid, text
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, now, org_column

RUN_STATUSES = ("queued", "running", "succeeded", "failed", "skipped")


class ScheduledTaskModel(IdentityPrimaryKey, Base):
    """A prompt sent to an agent on a cron schedule in a time zone."""

    __tablename__ = "scheduled_tasks"
    __table_args__ = (
        Index("ix_scheduled_tasks_org", "org_id", "id"),
        Index("ix_scheduled_tasks_due", "next_run_at", postgresql_where=text("enabled")),
    )

    org_id: Mapped[str] = org_column()
    user_id: Mapped[str] = mapped_column(String(128))
    agent_id: Mapped[int] = mapped_column(BigInteger)
    name: Mapped[str] = mapped_column(String(200))
    prompt: Mapped[str] = mapped_column(Text)
    cron: Mapped[str] = mapped_column(String(200))
    timezone: Mapped[str] = mapped_column(String(64))
    enabled: Mapped[bool] = mapped_column(Boolean)
    next_run_at: Mapped[dt.datetime | None] = mapped_column(DateTimeUTC(timezone=True))
    last_run_at: Mapped[dt.datetime | None] = mapped_column(DateTimeUTC(timezone=True))
    last_run_status: Mapped[str | None] = mapped_column(String(16))
    created_at: Mapped[dt.datetime] = now()
    updated_at: Mapped[dt.datetime] = now()


class ScheduledRunModel(Base):
    """One run of a task; kept when the task is deleted."""

    __tablename__ = "scheduled_runs"
    __table_args__ = (
        CheckConstraint(f"status IN {RUN_STATUSES!r}", name="ck_scheduled_runs_status"),
        Index(
            "ix_scheduled_runs_task",
            "org_id",
            "task_id",
            text("created_at DESC"),
            text("id DESC"),
        ),
        Index(
            "ux_scheduled_runs_active",
            "task_id",
            unique=True,
            postgresql_where=text("status IN ('queued', 'running')"),
        ),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    org_id: Mapped[str] = org_column()
    task_id: Mapped[int] = mapped_column(BigInteger)
    scheduled_for: Mapped[dt.datetime] = mapped_column(DateTimeUTC(timezone=True))
    status: Mapped[str] = mapped_column(String(16))
    thread_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = now()
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTimeUTC(timezone=True))
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTimeUTC(timezone=True))
