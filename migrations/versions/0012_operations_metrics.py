"""Operations metrics: aggregate counts across organizations for `GET /metrics`.

The app role sees no row without `app.org_id` (row-level security), so the scrape reads through
two security-definer functions that return counts only, never a row, an organization or a user:
`ap_file_state_counts()` (knowledge-base files by processing state) and `ap_model_usage_totals()`
(tokens and cost of the usage ledger by provider, the part of `model` before `:`). The tables
force row-level security on their owner too, so each gets a read-only policy that lets the owner
(who runs these functions) see every row; the app role stays confined to its organization.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-23
"""

from __future__ import annotations

import os

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

TABLES = ("knowledge_base_files", "usage_events")
POLICY = "owner_aggregates"
FUNCTIONS = ("ap_file_state_counts()", "ap_model_usage_totals()")


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def upgrade() -> None:
    role = app_role()
    for table in TABLES:
        owner = (
            "current_user = (SELECT tableowner FROM pg_tables "
            f"WHERE schemaname = 'public' AND tablename = '{table}')"
        )
        op.execute(f"CREATE POLICY {POLICY} ON {table} FOR SELECT USING ({owner})")
    op.execute(
        """
        CREATE FUNCTION ap_file_state_counts()
        RETURNS TABLE (state text, files bigint)
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            SELECT f.processing_status::text, count(*) FROM knowledge_base_files f GROUP BY 1
        $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION ap_model_usage_totals()
        RETURNS TABLE (provider text, input_tokens numeric, output_tokens numeric,
                       cost_usd numeric)
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            SELECT split_part(u.model, ':', 1), sum(u.input_tokens), sum(u.output_tokens),
                   sum(u.cost_usd)
            FROM usage_events u GROUP BY 1
        $$
        """
    )
    for function in FUNCTIONS:
        op.execute(f"REVOKE ALL ON FUNCTION {function} FROM PUBLIC")
        op.execute(f'GRANT EXECUTE ON FUNCTION {function} TO "{role}"')


def downgrade() -> None:
    for function in reversed(FUNCTIONS):
        op.execute(f"DROP FUNCTION {function}")
    for table in reversed(TABLES):
        op.execute(f"DROP POLICY {POLICY} ON {table}")
