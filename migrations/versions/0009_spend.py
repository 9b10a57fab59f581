"""Organization settings and spend caps: the settings, a daily roll-up of the usage ledger, and
the reservations that keep concurrent model calls under a cap.

`org_settings` holds each organization's saved settings (one JSON object, replaced whole).
`usage_daily` sums `usage_events.cost_usd` per organization and UTC day; a trigger keeps it
exact on every insert, update and delete of the ledger, so a month's spend is at most 31 rows
however many calls it had. `spend_reservations` holds the worst-case cost of model calls under
way; each expires, so a process that dies mid-call frees its share by itself.

`ap_reserve_spend` admits a call or refuses it in one statement: under a transaction-scoped
advisory lock per organization, it drops expired reservations, adds what the ledger recorded
in each period to what is still reserved, and returns the periods whose cap that total has
reached. When it returns none, it has recorded the reservation. An organization without caps
takes no lock and reserves nothing.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

TABLES = ("org_settings", "usage_daily", "spend_reservations")


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def upgrade() -> None:
    role = app_role()
    op.create_table(
        "org_settings",
        sa.Column("org_id", sa.String(128), primary_key=True),
        sa.Column("settings", pg.JSONB, nullable=False),
        sa.Column("updated_by", sa.String(128)),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )
    op.create_table(
        "usage_daily",
        sa.Column("org_id", sa.String(128), primary_key=True),
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("cost_usd", sa.Numeric(18, 8), nullable=False),
    )
    op.create_table(
        "spend_reservations",
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("org_id", sa.String(128), nullable=False),
        sa.Column("amount_usd", sa.Numeric(18, 8), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(
        "ix_spend_reservations_org_expiry", "spend_reservations", ["org_id", "expires_at"]
    )
    op.execute(
        """
        INSERT INTO usage_daily (org_id, day, cost_usd)
        SELECT org_id, (created_at AT TIME ZONE 'UTC')::date, sum(cost_usd)
        FROM usage_events GROUP BY 1, 2
        """
    )
    op.execute(
        """
        CREATE FUNCTION ap_roll_up_usage() RETURNS trigger
        LANGUAGE plpgsql SET search_path = public AS $$
        BEGIN
            IF TG_OP IN ('UPDATE', 'DELETE') THEN
                UPDATE usage_daily SET cost_usd = cost_usd - OLD.cost_usd
                WHERE org_id = OLD.org_id AND day = (OLD.created_at AT TIME ZONE 'UTC')::date;
            END IF;
            IF TG_OP IN ('INSERT', 'UPDATE') THEN
                INSERT INTO usage_daily AS u (org_id, day, cost_usd)
                VALUES (NEW.org_id, (NEW.created_at AT TIME ZONE 'UTC')::date, NEW.cost_usd)
                ON CONFLICT (org_id, day) DO UPDATE SET cost_usd = u.cost_usd + EXCLUDED.cost_usd;
            END IF;
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER usage_events_roll_up AFTER INSERT OR UPDATE OR DELETE ON usage_events
        FOR EACH ROW EXECUTE FUNCTION ap_roll_up_usage()
        """
    )
    op.execute(
        """
        CREATE FUNCTION ap_reserve_spend(
            p_org text, p_id uuid, p_amount numeric, p_ttl interval,
            p_day date, p_week date, p_month date
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
            IF caps IS NULL OR jsonb_typeof(caps) <> 'object' OR caps = '{}'::jsonb THEN
                RETURN;
            END IF;
            PERFORM pg_advisory_xact_lock(hashtextextended('ap_reserve_spend:' || p_org, 0));
            DELETE FROM spend_reservations r WHERE r.org_id = p_org AND r.expires_at <= now();
            SELECT coalesce(sum(r.amount_usd), 0) INTO reserved
            FROM spend_reservations r WHERE r.org_id = p_org;
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
                INSERT INTO spend_reservations (id, org_id, amount_usd, expires_at)
                VALUES (p_id, p_org, p_amount, now() + p_ttl);
            END IF;
        END $$
        """
    )
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        check = "org_id = current_setting('app.org_id', true)"
        op.execute(f"CREATE POLICY org_isolation ON {table} USING ({check}) WITH CHECK ({check})")
        op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO "{role}"')
    op.execute(
        "REVOKE ALL ON FUNCTION ap_reserve_spend(text, uuid, numeric, interval, date, date, date)"
        " FROM PUBLIC"
    )
    op.execute(
        "GRANT EXECUTE ON FUNCTION ap_reserve_spend(text, uuid, numeric, interval, date, date,"
        f' date) TO "{role}"'
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION ap_reserve_spend(text, uuid, numeric, interval, date, date, date)")
    op.execute("DROP TRIGGER usage_events_roll_up ON usage_events")
    op.execute("DROP FUNCTION ap_roll_up_usage()")
    for table in reversed(TABLES):
        op.drop_table(table)
