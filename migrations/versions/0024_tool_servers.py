"""Tool servers: an organization's connections to MCP servers and OpenAPI-described HTTP APIs,
and the tools each agent may call.

`tool_servers` holds each server's fields, the names of its headers and their values sealed
(`sealed_headers`, authenticated encryption under `AP_SECRETS_KEY`: the values themselves are
never stored in clear), and what its last refresh found: `tools` (`[{name, description,
inputSchema}]`), `status` and `error`. `require_approval` is `"never"`, `"always"` or a list of
tool names. The name is unique in the organization and sorts bytewise (`COLLATE "C"`).

`agents.tools` is the agent's grants, `[{toolServerId, names}]` (`names` null: every tool of the
server); deleting a server takes it out of every agent's list in the same transaction.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-29
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

TABLE = "tool_servers"
ORG = "org_id = current_setting('app.org_id', true)"


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def _ts(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(
        name,
        sa.DateTime(timezone=True),
        nullable=nullable,
        server_default=None if nullable else sa.func.now(),
    )


def upgrade() -> None:
    role = app_role()
    op.create_table(
        TABLE,
        sa.Column("id", sa.BigInteger, sa.Identity(start=1, increment=1), primary_key=True),
        sa.Column("org_id", sa.String(128), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("name", sa.String(64, collation="C"), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("header_names", pg.ARRAY(sa.Text), nullable=False),
        sa.Column("sealed_headers", sa.LargeBinary),
        sa.Column("require_approval", pg.JSONB, nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("tools", pg.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        _ts("refreshed_at", nullable=True),
        _ts("created_at"),
        _ts("updated_at"),
    )
    op.create_index("ux_tool_servers_org_name", TABLE, ["org_id", "name"], unique=True)
    op.execute(f"ALTER TABLE {TABLE} ENABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER TABLE {TABLE} FORCE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY org_isolation ON {TABLE} USING ({ORG}) WITH CHECK ({ORG})")
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON {TABLE} TO "{role}"')
    op.execute(f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
    op.add_column(
        "agents",
        sa.Column("tools", pg.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
    )


def downgrade() -> None:
    op.drop_column("agents", "tools")
    op.drop_table(TABLE)
