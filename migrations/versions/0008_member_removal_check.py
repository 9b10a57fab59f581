"""The removal check of a member's request, read in the round trip that scopes its connection.

`ap_member_removed_at(org, user)` returns when the user was last removed from the organization
(`membership_removals`). It sets `app.org_id` itself before reading, so that row-level security
lets it see the organization's row whatever order the scoping statement evaluates its parts in.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import os

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    role = os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")
    op.execute(
        """
        CREATE FUNCTION ap_member_removed_at(p_org text, p_user text) RETURNS timestamptz
        LANGUAGE plpgsql VOLATILE SET search_path = public AS $$
        BEGIN
            PERFORM set_config('app.org_id', p_org, false);
            RETURN (
                SELECT removed_at FROM membership_removals
                WHERE org_id = p_org AND user_id = p_user
            );
        END $$
        """
    )
    op.execute("REVOKE ALL ON FUNCTION ap_member_removed_at(text, text) FROM PUBLIC")
    op.execute(f'GRANT EXECUTE ON FUNCTION ap_member_removed_at(text, text) TO "{role}"')


def downgrade() -> None:
    op.execute("DROP FUNCTION ap_member_removed_at(text, text)")
