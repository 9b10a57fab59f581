"""Knowledge-base totals written by their trigger only.

`knowledge_base_stats` (migration 0013) was kept by a trigger running with the rights of the
role that changed the files, so the app role held INSERT and UPDATE on the table: row-level
security kept it to its own organization, but it could misstate its own totals, and those
totals now also decide which knowledge bases get an HNSW index of their own (0015). The
trigger function now runs as the schema owner (SECURITY DEFINER, its search_path pinned), whose
writes the table's policy lets through, and the app role keeps SELECT only.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-24
"""

from __future__ import annotations

import os

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def upgrade() -> None:
    op.execute("ALTER FUNCTION ap_roll_up_files() SECURITY DEFINER")
    op.execute("ALTER FUNCTION ap_roll_up_files() SET search_path = public, pg_temp")
    op.execute("REVOKE ALL ON FUNCTION ap_roll_up_files() FROM PUBLIC")
    op.execute(f'REVOKE INSERT, UPDATE ON knowledge_base_stats FROM "{app_role()}"')


def downgrade() -> None:
    op.execute(f'GRANT INSERT, UPDATE ON knowledge_base_stats TO "{app_role()}"')
    op.execute("GRANT EXECUTE ON FUNCTION ap_roll_up_files() TO PUBLIC")
    op.execute("ALTER FUNCTION ap_roll_up_files() SET search_path = public")
    op.execute("ALTER FUNCTION ap_roll_up_files() SECURITY INVOKER")
