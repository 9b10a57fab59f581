"""Operations metrics: aggregate counts across organizations for `GET /metrics`.

The app role sees no row without `app.org_id` (row-level security), so the scrape reads through
two security-definer functions that return counts only, never a row, an organization or a user:
`ap_file_state_counts()` (knowledge-base files by processing state) and `ap_model_usage_totals()`
(tokens and cost of the usage ledger by provider, the part of `model` before `:`). The tables
force row-level security on their owner too: `knowledge_base_files` lets its owner read already
(0002), `usage_events` gets a read-only policy for the migrating role only (who owns these
functions); the app role meets no new policy and stays confined to its organization.

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

POLICY = "owner_aggregates"
FUNCTIONS = ("ap_file_state_counts()", "ap_model_usage_totals()")


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def upgrade() -> None:
    role = app_role()
    # For the functions' owner (the role migrating) only, so the app role's own policy stays
    # the only one it meets; knowledge_base_files' policy already lets the owner read (0002).
    op.execute(f"CREATE POLICY {POLICY} ON usage_events FOR SELECT TO CURRENT_USER USING (true)")
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
    op.execute(f"DROP POLICY {POLICY} ON usage_events")
