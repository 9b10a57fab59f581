"""How many times each queued job started and ended (migration 0005_job_runs).

The queue itself (`pgqueuer`, `pgqueuer_log`, `pgqueuer_schedules`, `pgqueuer_statistics`, the
`pgqueuer_status` type, its function and trigger) is pgqueuer's, installed by its own script in
migration 0001: not modelled here, and left out of autogenerate (see `migrations/env.py`).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import BigInteger, Column, ForeignKey, Integer, MetaData, Table
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, now

PGQUEUER = Table("pgqueuer", MetaData(), Column("id", BigInteger, primary_key=True))
"""pgqueuer's queue table, only the key `pgqueuer_job_runs` refers to. It has a `MetaData` of
its own, so neither `create_all` nor autogenerate takes it for one of ours."""


class JobRunModel(Base):
    """One row per job that has started at least once, going with its job. A start without an
    end is a run cut short. No `org_id` and no row-level security: like the queue, it spans
    organizations and holds no tenant data."""

    __tablename__ = "pgqueuer_job_runs"

    job_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey(PGQUEUER.c.id, ondelete="CASCADE"), primary_key=True
    )
    started: Mapped[int] = mapped_column(Integer, server_default="0")
    ended: Mapped[int] = mapped_column(Integer, server_default="0")
    updated_at: Mapped[dt.datetime] = now()
