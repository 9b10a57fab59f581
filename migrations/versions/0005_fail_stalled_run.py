"""Failing a stalled chat run is one function, for the worker's reaper and for one run's reader.

`ap_fail_stalled_chat_runs(stale_after, only_run)` fails the runs still in progress whose
heartbeat is older than `stale_after` (only `only_run` when given): the run, its message and
the conversation's stream status, exactly as the reaper did. It runs with the caller's rights,
so the app role, scoped to an organization, fails only that organization's runs: a reader of a
run whose producer went away ends it without waiting for the reaper. `ap_reap_stalled_chat_runs`
keeps its signature and calls it as the owner, across organizations.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21
"""

from __future__ import annotations

import os

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

MESSAGE = """
            message text := 'The response stopped before it finished (the server producing '
                            'it went away). Send the message again to retry.';"""


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def _failing(only: str) -> str:
    """The statement that fails the stalled runs (narrowed by `only`), their messages and
    conversations, returning (org_id, run_id, thread_id) of each."""
    return f"""
            WITH stalled AS (
                UPDATE chat_runs r SET status = 'failed', error = message, finished_at = now()
                WHERE r.status = 'in_progress' AND r.heartbeat_at < now() - stale_after{only}
                RETURNING r.org_id, r.id, r.thread_id, r.message_id
            ), messages AS (
                UPDATE chat_messages m SET status = 'failed', error = message, updated_at = now()
                FROM stalled s WHERE m.id = s.message_id
            ), threads AS (
                UPDATE conversations c SET stream_status = 'failed', updated_at = now()
                FROM stalled s
                WHERE c.thread_id = s.thread_id AND c.stream_status = 'in_progress'
            )
            SELECT s.org_id::text, s.id, s.thread_id FROM stalled s;"""


def upgrade() -> None:
    role = app_role()
    op.execute(
        f"""
        CREATE FUNCTION ap_fail_stalled_chat_runs(stale_after interval, only_run uuid)
        RETURNS TABLE (org_id text, run_id uuid, thread_id uuid)
        LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
        DECLARE{MESSAGE}
        BEGIN
            RETURN QUERY{_failing(" AND (only_run IS NULL OR r.id = only_run)")}
        END $$
        """
    )
    op.execute("REVOKE ALL ON FUNCTION ap_fail_stalled_chat_runs(interval, uuid) FROM PUBLIC")
    op.execute(f'GRANT EXECUTE ON FUNCTION ap_fail_stalled_chat_runs(interval, uuid) TO "{role}"')
    # Replacing keeps the reaper's grants.
    op.execute(
        """
        CREATE OR REPLACE FUNCTION ap_reap_stalled_chat_runs(stale_after interval)
        RETURNS TABLE (org_id text, run_id uuid, thread_id uuid)
        LANGUAGE sql SECURITY DEFINER SET search_path = public, pg_temp AS $$
            SELECT * FROM ap_fail_stalled_chat_runs(stale_after, NULL)
        $$
        """
    )


def downgrade() -> None:
    op.execute(
        f"""
        CREATE OR REPLACE FUNCTION ap_reap_stalled_chat_runs(stale_after interval)
        RETURNS TABLE (org_id text, run_id uuid, thread_id uuid)
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
        DECLARE{MESSAGE}
        BEGIN
            RETURN QUERY{_failing("")}
        END $$
        """
    )
    op.execute("DROP FUNCTION ap_fail_stalled_chat_runs(interval, uuid)")
