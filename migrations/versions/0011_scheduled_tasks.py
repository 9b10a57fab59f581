"""Scheduled agent runs: the tasks and the record of every run.

`scheduled_tasks.next_run_at` is the task's next occurrence (null while it is disabled). The
scheduler reads the due tasks of every organization through `ap_due_scheduled_tasks` (a
security-definer read of ids only), then claims each in its organization with `FOR UPDATE SKIP
LOCKED`, advancing `next_run_at` and recording the run in the same transaction: each occurrence
runs once however many workers race. `ux_scheduled_runs_active` allows one queued or running run
per task, so the skip rule holds even against a concurrent run-now. Runs keep their task's id
without a foreign key: deleting a task keeps its runs (and their conversations).
`ap_reap_stalled_scheduled_runs` fails runs left `running` by a worker that went away.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-23
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

TABLES = ("scheduled_tasks", "scheduled_runs")
STATUSES = ("queued", "running", "succeeded", "failed", "skipped")


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def _ts(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(
        name,
        sa.DateTime(timezone=True),
        nullable=nullable,
        server_default=None if nullable else sa.func.now(),
    )


def upgrade() -> None:
    role = app_role()
    op.create_table(
        "scheduled_tasks",
        sa.Column("id", sa.BigInteger, sa.Identity(start=1, increment=1), primary_key=True),
        sa.Column("org_id", sa.String(128), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("agent_id", sa.BigInteger, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("prompt", sa.Text, nullable=False),
        sa.Column("cron", sa.String(200), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        _ts("next_run_at", nullable=True),
        _ts("last_run_at", nullable=True),
        sa.Column("last_run_status", sa.String(16)),
        _ts("created_at"),
        _ts("updated_at"),
    )
    op.create_index("ix_scheduled_tasks_org", "scheduled_tasks", ["org_id", "id"])
    op.create_index(
        "ix_scheduled_tasks_due",
        "scheduled_tasks",
        ["next_run_at"],
        postgresql_where=sa.text("enabled"),
    )
    op.create_table(
        "scheduled_runs",
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("org_id", sa.String(128), nullable=False),
        sa.Column("task_id", sa.BigInteger, nullable=False),
        sa.Column("scheduled_for", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("thread_id", sa.Uuid),
        sa.Column("error", sa.Text),
        _ts("created_at"),
        _ts("started_at", nullable=True),
        _ts("finished_at", nullable=True),
        sa.CheckConstraint(f"status IN {STATUSES!r}", name="ck_scheduled_runs_status"),
    )
    op.create_index(
        "ix_scheduled_runs_task",
        "scheduled_runs",
        ["org_id", "task_id", sa.text("created_at DESC"), sa.text("id DESC")],
    )
    op.create_index(
        "ux_scheduled_runs_active",
        "scheduled_runs",
        ["task_id"],
        unique=True,
        postgresql_where=sa.text("status IN ('queued', 'running')"),
    )
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        # The owner passes too: the security-definer functions below read across organizations.
        check = (
            "org_id = current_setting('app.org_id', true) OR current_user = "
            f"(SELECT tableowner FROM pg_tables WHERE tablename = '{table}')"
        )
        op.execute(f"CREATE POLICY org_isolation ON {table} USING ({check}) WITH CHECK ({check})")
        op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO "{role}"')
    op.execute(
        """
        CREATE FUNCTION ap_due_scheduled_tasks(p_now timestamptz, p_limit integer)
        RETURNS TABLE (org_id text, task_id bigint)
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            SELECT t.org_id, t.id FROM scheduled_tasks t
            WHERE t.enabled AND t.next_run_at <= p_now
            ORDER BY t.next_run_at LIMIT p_limit
        $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION ap_reap_stalled_scheduled_runs(stale_after interval)
        RETURNS TABLE (org_id text, run_id uuid)
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
        BEGIN
            RETURN QUERY
            WITH failed AS (
                UPDATE scheduled_runs r
                SET status = 'failed', finished_at = now(),
                    error = 'The run stopped before it finished (the worker running it went away).'
                WHERE r.status = 'running' AND r.started_at < now() - stale_after
                RETURNING r.org_id, r.id, r.task_id
            ), marked AS (
                UPDATE scheduled_tasks t SET last_run_status = 'failed'
                FROM failed f WHERE t.id = f.task_id
            )
            SELECT f.org_id::text, f.id FROM failed f;
        END $$
        """
    )
    for function in (
        "ap_due_scheduled_tasks(timestamptz, integer)",
        "ap_reap_stalled_scheduled_runs(interval)",
    ):
        op.execute(f"REVOKE ALL ON FUNCTION {function} FROM PUBLIC")
        op.execute(f'GRANT EXECUTE ON FUNCTION {function} TO "{role}"')


def downgrade() -> None:
    op.execute("DROP FUNCTION ap_reap_stalled_scheduled_runs(interval)")
    op.execute("DROP FUNCTION ap_due_scheduled_tasks(timestamptz, integer)")
    for table in reversed(TABLES):
        op.drop_table(table)
