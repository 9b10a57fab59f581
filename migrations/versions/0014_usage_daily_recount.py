"""The daily spend roll-up recounted from the usage ledger.

Migration 0009 filled `usage_daily` from `usage_events` reading as the schema owner, and
`usage_events` forces row-level security on its owner: an owner that is not a superuser saw no
event, so a database upgraded past 0009 that way started its roll-up empty, and spend caps
ignored what had been spent before (a superuser, as the embedded default, was not affected). The
roll-up is recounted here from the whole ledger, with the policies lifted for the owner while
it runs; its trigger has kept it since 0009, so the recount changes nothing where 0009 worked.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

TABLES = ("usage_events", "usage_daily")


def upgrade() -> None:
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
    # The ledger stays still meanwhile: a model call settling now waits for the recount
    # rather than landing between the delete and the insert.
    op.execute("LOCK TABLE usage_events IN SHARE MODE")
    op.execute("DELETE FROM usage_daily")
    op.execute(
        """
        INSERT INTO usage_daily (org_id, day, cost_usd)
        SELECT org_id, (created_at AT TIME ZONE 'UTC')::date, sum(cost_usd)
        FROM usage_events GROUP BY 1, 2
        """
    )
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")


def downgrade() -> None:
    """Nothing to undo: the recount is what the roll-up should always have held."""
