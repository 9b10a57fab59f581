"""The runs of each queued job: how many started and how many ended, so that a run cut short
(its worker process died mid-job) is known to the next one.

`pgqueuer_job_runs` has one row per job that has started at least once, keyed by pgqueuer's
job id; a row goes with its job (`ON DELETE CASCADE`) when the job is done for good. The
worker adds a start in a committed statement of its own before a handler runs, and an end when
it returns or raises; a start without an end is a run cut short.

No row-level security: like the queue it belongs to, the table spans organizations (a worker
serves them all, and counts a run before it knows or enters the job's organization) and holds
no tenant data, only job ids and counters. The app role may read and write it, as it may the
queue; no request path reads it.

Revision ID: 0005_job_runs
Revises: 0005
Create Date: 2026-11-21
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op

revision = "0005_job_runs"
down_revision = "0005"
branch_labels = None
depends_on = None

TABLE = "pgqueuer_job_runs"


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column(
            "job_id",
            sa.BigInteger,
            sa.ForeignKey("pgqueuer.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("started", sa.Integer, nullable=False, server_default="0"),
        sa.Column("ended", sa.Integer, nullable=False, server_default="0"),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON {TABLE} TO "{app_role()}"')


def downgrade() -> None:
    op.drop_table(TABLE)
