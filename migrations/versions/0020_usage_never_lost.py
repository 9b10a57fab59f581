"""Usage is never lost: every model call leaves a reservation until it is settled.

Until now only organizations with a spend cap reserved anything, and a reservation held only
an amount: a process killed during a model call lost that call's usage, and its reservation
simply expired. Now `ap_reserve_spend` records a reservation for every call (without the cap
check's lock when the organization has no cap), with what settling it needs: who and what it
is for (`user_id`, `thread_id`, `run_id`, `purpose`, `model`), the prompt's estimated tokens and
how much text the answer had stored when the call began (`text_offset`). An
expired reservation no longer counts against a cap but stays until settled.

`ap_abandoned_reservations` (the worker's reaper, as the owner, across organizations) lists the
reservations whose call can no longer settle itself: a call of a chat answer (`run_id`) whose
run ended more than `quiet` ago (its own settling follows the run's end by moments) or whose
producer went silent (the reaper fails such a run), and a reservation of no chat answer past its
expiry (one of an answer still running is its answer's to settle, however long it takes). With
each it gives the characters of text its call produced: the run's stored text from where it
stood when the call was reserved (`text_offset`) to where the next call of the run began.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

OLD_SIGNATURE = "ap_reserve_spend(text, uuid, numeric, interval, date, date, date)"
SIGNATURE = (
    "ap_reserve_spend(text, uuid, numeric, interval, date, date, date, text, uuid, text, text,"
    " integer, uuid, integer)"
)


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def _reserve(*, with_details: bool) -> str:
    """`ap_reserve_spend`'s body: with the call's details (this migration) or as 0009 made it."""
    params = (
        ", p_user text, p_thread uuid, p_purpose text, p_model text, p_input integer, p_run uuid,"
        " p_offset integer"
        if with_details
        else ""
    )
    columns = "id, org_id, amount_usd, expires_at"
    values = "p_id, p_org, p_amount, now() + p_ttl"
    if with_details:
        columns += ", user_id, thread_id, purpose, model, input_tokens, run_id, text_offset"
        values += ", p_user, p_thread, p_purpose, p_model, p_input, p_run, p_offset"
    uncapped = (
        f"INSERT INTO spend_reservations ({columns}) VALUES ({values});" if with_details else ""
    )
    expired = (
        ""
        if with_details
        else "DELETE FROM spend_reservations r WHERE r.org_id = p_org AND r.expires_at <= now();"
    )
    live = " AND r.expires_at > now()" if with_details else ""
    return f"""
        CREATE FUNCTION ap_reserve_spend(
            p_org text, p_id uuid, p_amount numeric, p_ttl interval,
            p_day date, p_week date, p_month date{params}
        ) RETURNS TABLE (period text, cap numeric, spent numeric)
        LANGUAGE plpgsql VOLATILE SET search_path = public AS $$
        DECLARE
            caps jsonb;
            reserved numeric;
            spent_day numeric;
            spent_week numeric;
            spent_month numeric;
            refused boolean := false;
        BEGIN
            SELECT s.settings -> 'spendCaps' INTO caps FROM org_settings s WHERE s.org_id = p_org;
            IF caps IS NULL OR jsonb_typeof(caps) <> 'object' OR caps = '{{}}'::jsonb THEN
                {uncapped}
                RETURN;
            END IF;
            PERFORM pg_advisory_xact_lock(hashtextextended('ap_reserve_spend:' || p_org, 0));
            {expired}
            SELECT coalesce(sum(r.amount_usd), 0) INTO reserved
            FROM spend_reservations r WHERE r.org_id = p_org{live};
            SELECT coalesce(sum(u.cost_usd) FILTER (WHERE u.day >= p_day), 0),
                   coalesce(sum(u.cost_usd) FILTER (WHERE u.day >= p_week), 0),
                   coalesce(sum(u.cost_usd) FILTER (WHERE u.day >= p_month), 0)
            INTO spent_day, spent_week, spent_month
            FROM usage_daily u WHERE u.org_id = p_org AND u.day >= least(p_week, p_month);
            FOR period, cap, spent IN
                SELECT k, (caps ->> k)::numeric, v + reserved
                FROM (VALUES ('daily', spent_day), ('weekly', spent_week),
                             ('monthly', spent_month)) AS t (k, v)
                WHERE caps ? k AND jsonb_typeof(caps -> k) = 'number'
            LOOP
                IF spent >= cap THEN
                    refused := true;
                    RETURN NEXT;
                END IF;
            END LOOP;
            IF NOT refused THEN
                INSERT INTO spend_reservations ({columns}) VALUES ({values});
            END IF;
        END $$
        """


def _for_owner(statement: str, table: str) -> None:
    """`statement` with `%I` the quoted name of `table`'s owner (as 0017 does)."""
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


def _grant(signature: str) -> None:
    op.execute(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")
    op.execute(f'GRANT EXECUTE ON FUNCTION {signature} TO "{app_role()}"')


def upgrade() -> None:
    op.add_column("spend_reservations", sa.Column("user_id", sa.String(128)))
    op.add_column("spend_reservations", sa.Column("thread_id", sa.Uuid))
    op.add_column("spend_reservations", sa.Column("purpose", sa.String(32)))
    op.add_column("spend_reservations", sa.Column("model", sa.String(255)))
    op.add_column(
        "spend_reservations",
        sa.Column("input_tokens", sa.Integer, nullable=False, server_default="0"),
    )
    op.add_column("spend_reservations", sa.Column("run_id", sa.Uuid))
    op.add_column(
        "spend_reservations",
        sa.Column("text_offset", sa.Integer, nullable=False, server_default="0"),
    )
    # The reaper's function reads every organization's reservations as the owner.
    _for_owner(
        "CREATE POLICY owner_access ON spend_reservations FOR SELECT TO %I USING (true)",
        "spend_reservations",
    )
    op.execute(f"DROP FUNCTION {OLD_SIGNATURE}")
    op.execute(_reserve(with_details=True))
    _grant(SIGNATURE)
    op.execute(
        """
        CREATE FUNCTION ap_abandoned_reservations(quiet interval, max_rows integer)
        RETURNS TABLE (id uuid, org_id text, user_id text, thread_id uuid, purpose text,
                       model text, input_tokens integer, run_id uuid, output_chars bigint)
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            WITH abandoned AS (
                SELECT r.*, run.message_id
                FROM spend_reservations r
                LEFT JOIN chat_runs run ON run.id = r.run_id
                WHERE (run.id IS NULL AND r.expires_at <= now())
                   OR (run.status <> 'in_progress'
                       AND (run.finished_at < now() - quiet
                            OR run.heartbeat_at < now() - 2 * quiet))
                ORDER BY r.created_at
                LIMIT max_rows
            ), answered AS (
                SELECT a.*, (
                    SELECT coalesce(sum(length(part ->> 'text')), 0)
                    FROM chat_messages m, jsonb_array_elements(m.parts) part
                    WHERE m.id = a.message_id AND part ->> 'type' = 'text'
                ) AS total, lead(a.text_offset) OVER (
                    PARTITION BY a.run_id ORDER BY a.created_at
                ) AS next_offset
                FROM abandoned a
            )
            SELECT id, org_id, user_id, thread_id, purpose, model, input_tokens, run_id,
                CASE WHEN message_id IS NULL THEN 0
                     ELSE greatest(0, least(coalesce(next_offset, total), total) - text_offset)
                END
            FROM answered
        $$
        """
    )
    op.execute("REVOKE ALL ON FUNCTION ap_abandoned_reservations(interval, integer) FROM PUBLIC")
    op.execute(
        f'GRANT EXECUTE ON FUNCTION ap_abandoned_reservations(interval, integer) TO "{app_role()}"'
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION ap_abandoned_reservations(interval, integer)")
    op.execute(f"DROP FUNCTION {SIGNATURE}")
    op.execute(_reserve(with_details=False))
    _grant(OLD_SIGNATURE)
    op.execute("DROP POLICY owner_access ON spend_reservations")
    # Without the reaper, expired reservations would stay for ever (0009 deleted them as it went).
    op.execute("DELETE FROM spend_reservations WHERE expires_at <= now()")
    columns = ("text_offset", "run_id", "input_tokens", "model", "purpose", "thread_id", "user_id")
    for column in columns:
        op.drop_column("spend_reservations", column)
