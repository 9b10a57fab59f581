"""Members and the identity provider: invitations of the local directory, the removals that
end a member's access at once, the audit log, and the receipts of the provider's webhooks.

The local directory's members are the rows of `memberships` (migration 0001). An invitation is
`pending` until it is accepted or revoked; one past `expires_at` reads `expired` and is marked
so when the same e-mail is invited again, since at most one invitation per e-mail (compared
case-insensitively) may be pending in an organization (`ux_invitations_pending_email`).

`membership_removals` keeps, per organization and user, the last moment the user was removed:
tokens issued at or before it are refused. `audit_log` is append-only, read newest first.

`webhook_receipts` has no `org_id` and no row-level security: a webhook message's id is
global (the request names no organization), and the table holds only those ids and when they
arrived. As with the queue's tables, the app role may read, add and prune them.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TENANT_TABLES = ("membership_removals", "invitations", "audit_log")
RECEIPTS = "webhook_receipts"


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def _ts(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(
        name,
        sa.DateTime(timezone=True),
        nullable=nullable,
        server_default=None if nullable else sa.func.now(),
    )


def _org() -> sa.Column:
    return sa.Column("org_id", sa.String(128), nullable=False)


def upgrade() -> None:
    role = app_role()
    op.create_table(
        "membership_removals",
        sa.Column("org_id", sa.String(128), primary_key=True),
        sa.Column("user_id", sa.String(128), primary_key=True),
        sa.Column("removed_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "invitations",
        sa.Column("id", sa.String(128), primary_key=True),
        _org(),
        sa.Column("email", sa.String(320), nullable=False),
        sa.Column("role", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("inviter_user_id", sa.String(128), nullable=False),
        _ts("created_at"),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        _ts("accepted_at", nullable=True),
        sa.Column("accepted_user_id", sa.String(128)),
        _ts("revoked_at", nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'accepted', 'revoked', 'expired')",
            name="ck_invitations_status",
        ),
    )
    op.create_index(
        "ux_invitations_pending_email",
        "invitations",
        ["org_id", sa.text("lower(email)")],
        unique=True,
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index(
        "ix_invitations_org_created", "invitations", ["org_id", sa.text("created_at DESC")]
    )
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger, sa.Identity(start=1, increment=1), primary_key=True),
        _org(),
        _ts("at"),
        sa.Column("actor_user_id", sa.String(128)),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target_type", sa.String(64), nullable=False),
        sa.Column("target_id", sa.Text, nullable=False),
        sa.Column("details", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    )
    op.create_index("ix_audit_log_org", "audit_log", ["org_id", sa.text("id DESC")])
    op.create_table(
        RECEIPTS,
        sa.Column("message_id", sa.Text, primary_key=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_webhook_receipts_received", RECEIPTS, ["received_at"])

    for table in TENANT_TABLES:
        _secure(table, role)
    op.execute(f'GRANT SELECT, INSERT, DELETE ON {RECEIPTS} TO "{role}"')
    op.execute(f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO "{role}"')


def _secure(table: str, role: str) -> None:
    op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    check = "org_id = current_setting('app.org_id', true)"
    op.execute(f"CREATE POLICY org_isolation ON {table} USING ({check}) WITH CHECK ({check})")
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO "{role}"')


def downgrade() -> None:
    for table in (RECEIPTS, *reversed(TENANT_TABLES)):
        op.drop_table(table)
