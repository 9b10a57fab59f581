"""Issued uploads: every signed upload address handed out, and what became of its file.

`POST /upload/presigned` records the upload it signs (`issued`); `POST /kb/files` accepts only a
recorded upload and marks it `associated`; deleting the file (or its knowledge base) marks it
`deleted`. The local-disk upload endpoint refuses a PUT unless its upload is `issued`, so a
signed address replayed after the file was associated or deleted stores nothing; with S3, whose
bucket takes the PUT itself, the association refuses a `deleted` upload and a job removes the
file's objects once its address has expired. A table of one organization's rows, under
row-level security as 0017 left the others.

The scheduled-run reaper also sets the task's `last_run_at` with its `last_run_status` (the
failed run's `scheduled_for`), as the application does: the two describe the same run, and a
run older than the one the task shows leaves the task alone.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

TABLE = "issued_uploads"
STATES = ("issued", "associated", "deleted")
ORG = "org_id = current_setting('app.org_id', true)"
REAPER = """
    CREATE OR REPLACE FUNCTION ap_reap_stalled_scheduled_runs(stale_after interval)
    RETURNS TABLE (org_id text, run_id uuid)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
    BEGIN
        RETURN QUERY
        WITH failed AS (
            UPDATE scheduled_runs r
            SET status = 'failed', finished_at = now(),
                error = 'The run stopped before it finished (the worker running it went away).'
            WHERE r.status = 'running' AND r.started_at < now() - stale_after
            RETURNING r.org_id, r.id, r.task_id, r.scheduled_for
        ), marked AS (
            UPDATE scheduled_tasks t SET last_run_status = 'failed',
                last_run_at = f.scheduled_for, updated_at = now()
            FROM failed f
            WHERE t.id = f.task_id
                AND (t.last_run_at IS NULL OR t.last_run_at <= f.scheduled_for)
        )
        SELECT f.org_id::text, f.id FROM failed f;
    END $$
"""
OLD_REAPER = """
    CREATE OR REPLACE FUNCTION ap_reap_stalled_scheduled_runs(stale_after interval)
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


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def _for_owner(statement: str, table: str) -> None:
    """Runs `statement` with `%I` replaced by the quoted name of `table`'s owner (as 0017)."""
    quoted = statement.replace("'", "''")
    op.execute(
        f"""
        DO $$ BEGIN
            EXECUTE format('{quoted}', (
                SELECT pg_get_userbyid(c.relowner) FROM pg_class c
                WHERE c.oid = to_regclass(quote_ident(current_schema()) || '.{table}')));
        END $$
        """
    )


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("file_id", sa.Uuid, primary_key=True),
        sa.Column("org_id", sa.String(128), nullable=False),
        sa.Column("file_key", sa.Text, nullable=False),
        sa.Column("content_type", sa.String(255), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(16), nullable=False, server_default="issued"),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint(f"state IN {STATES!r}", name="ck_issued_uploads_state"),
    )
    op.execute(f"ALTER TABLE {TABLE} ENABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER TABLE {TABLE} FORCE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY org_isolation ON {TABLE} USING ({ORG}) WITH CHECK ({ORG})")
    _for_owner(f"CREATE POLICY owner_access ON {TABLE} TO %I USING (true) WITH CHECK (true)", TABLE)
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON {TABLE} TO "{app_role()}"')
    op.execute(REAPER)


def downgrade() -> None:
    op.execute(OLD_REAPER)
    op.drop_table(TABLE)
