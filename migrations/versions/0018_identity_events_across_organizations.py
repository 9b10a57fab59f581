"""The identity provider's user events across organizations, and the role a token claimed.

A user changed or deleted at the identity provider (`user.updated`, `user.deleted`) is changed
or removed in every organization they are a member of, while the webhook's request belongs to
no organization. Two security-definer functions, owned by the schema owner with their
search_path pinned, do exactly that and nothing else, each confined to the memberships of the
one user it is given: `ap_update_member_profile` sets the user's e-mail and names in each of
their memberships, `ap_remove_member_everywhere` removes the user from each organization as a
removal by the identity provider does (the membership with its metadata, the removal's time
moved forward, the audit entry). The app role may execute them; its row-level security is
unchanged. The owner's way through the three tables they write is a policy of its own, applied
to the owner only, as migration 0017 made them (and, as for 0017's, named when it is made:
after `ALTER TABLE ... OWNER TO` another role, run this migration's `downgrade` and `upgrade`
again).

`memberships.claimed_role` remembers the role the member's last token claimed: a token's claim
becomes the member's role only when it differs from it (the identity provider changed the
role), so a role an invitation granted, or the identity provider's membership event set (which
clears it), is not undone by the next token claiming what the previous ones claimed.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-25
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

TABLES = ("memberships", "membership_removals", "audit_log")
FUNCTIONS = (
    "ap_update_member_profile(text, text, text, text)",
    "ap_remove_member_everywhere(text, timestamptz)",
)


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
    op.add_column("memberships", sa.Column("claimed_role", sa.String(64), nullable=True))
    for table in TABLES:
        _for_owner(
            f"CREATE POLICY owner_access ON {table} TO %I USING (true) WITH CHECK (true)", table
        )
    op.execute(
        """
        CREATE FUNCTION ap_update_member_profile(
            p_user_id text, p_email text, p_first_name text, p_last_name text)
        RETURNS SETOF text
        LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            UPDATE memberships
            SET email = p_email, first_name = p_first_name, last_name = p_last_name,
                updated_at = now()
            WHERE user_id = p_user_id
              AND (email, first_name, last_name)
                  IS DISTINCT FROM (p_email, p_first_name, p_last_name)
            RETURNING org_id::text
        $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION ap_remove_member_everywhere(p_user_id text, p_removed_at timestamptz)
        RETURNS SETOF text
        LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            WITH removed AS (
                DELETE FROM memberships WHERE user_id = p_user_id RETURNING org_id
            ), recorded AS (
                INSERT INTO membership_removals AS r (org_id, user_id, removed_at)
                SELECT org_id, p_user_id, p_removed_at FROM removed
                ON CONFLICT (org_id, user_id) DO UPDATE
                SET removed_at = GREATEST(r.removed_at, excluded.removed_at)
            ), audited AS (
                INSERT INTO audit_log (org_id, actor_user_id, action, target_type, target_id)
                SELECT org_id, NULL, 'member.removed_by_identity_provider', 'user', p_user_id
                FROM removed
            )
            SELECT org_id::text FROM removed ORDER BY org_id
        $$
        """
    )
    for function in FUNCTIONS:
        op.execute(f"REVOKE ALL ON FUNCTION {function} FROM PUBLIC")
        op.execute(f'GRANT EXECUTE ON FUNCTION {function} TO "{app_role()}"')


def downgrade() -> None:
    for function in reversed(FUNCTIONS):
        op.execute(f"DROP FUNCTION {function}")
    for table in reversed(TABLES):
        op.execute(f"DROP POLICY owner_access ON {table}")
    op.drop_column("memberships", "claimed_role")
