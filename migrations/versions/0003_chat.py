"""Agents and tags, conversations, messages, assistant-response runs and their chunks, and the
usage ledger.

A run's chunks are the AI SDK UI message stream of one assistant response, stored as it is
produced so that any server process can replay it. Runs whose producer stopped sending
heartbeats (a crashed process) are failed by `ap_reap_stalled_chat_runs`, which spans
organizations and therefore runs as the owner; the policies of the tables it touches let the
owner through.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TENANT_TABLES = (
    "agent_tags",
    "agents",
    "agent_knowledge_bases",
    "agent_tag_links",
    "usage_events",
)
REAPED_TABLES = ("conversations", "chat_messages", "chat_runs", "chat_run_chunks")


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
        "agent_tags",
        sa.Column("id", sa.BigInteger, sa.Identity(start=1, increment=1), primary_key=True),
        _org(),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("color", sa.String(7)),
        _ts("created_at"),
        sa.UniqueConstraint("org_id", "name", name="uq_agent_tags_org_name"),
    )
    op.create_table(
        "agents",
        sa.Column("id", sa.BigInteger, sa.Identity(start=1, increment=1), primary_key=True),
        _org(),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text, nullable=False, server_default=""),
        sa.Column("role", sa.Text, nullable=False, server_default=""),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column(
            "skill_ids", pg.ARRAY(sa.BigInteger), nullable=False, server_default=sa.text("'{}'")
        ),
        _ts("created_at"),
        _ts("updated_at"),
    )
    op.create_index("ix_agents_org", "agents", ["org_id", "id"])
    op.create_table(
        "agent_knowledge_bases",
        _org(),
        sa.Column(
            "agent_id",
            sa.BigInteger,
            sa.ForeignKey("agents.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column(
            "knowledge_base_id",
            sa.BigInteger,
            sa.ForeignKey("knowledge_bases.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("position", sa.Integer, nullable=False, server_default="0"),
    )
    op.create_index("ix_agent_knowledge_bases_kb", "agent_knowledge_bases", ["knowledge_base_id"])
    op.create_table(
        "agent_tag_links",
        _org(),
        sa.Column(
            "agent_id",
            sa.BigInteger,
            sa.ForeignKey("agents.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column(
            "tag_id",
            sa.BigInteger,
            sa.ForeignKey("agent_tags.id", ondelete="CASCADE"),
            primary_key=True,
        ),
    )
    op.create_index("ix_agent_tag_links_tag", "agent_tag_links", ["tag_id"])
    op.create_table(
        "conversations",
        sa.Column("thread_id", sa.Uuid, primary_key=True),
        _org(),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("agent_id", sa.BigInteger, sa.ForeignKey("agents.id", ondelete="SET NULL")),
        sa.Column("title", sa.String(120)),
        sa.Column("title_source", sa.String(16), nullable=False),
        sa.Column("title_version", sa.Integer, nullable=False, server_default="0"),
        sa.Column("upstream_conversation_id", sa.Uuid),
        sa.Column("stream_status", sa.String(16)),
        _ts("created_at"),
        _ts("updated_at"),
    )
    op.create_index(
        "ix_conversations_member",
        "conversations",
        ["org_id", "user_id", sa.text("updated_at DESC"), sa.text("thread_id DESC")],
    )
    op.create_index("ix_conversations_agent", "conversations", ["agent_id"])
    op.create_table(
        "chat_messages",
        sa.Column("id", sa.Uuid, primary_key=True),
        _org(),
        sa.Column(
            "thread_id",
            sa.Uuid,
            sa.ForeignKey("conversations.thread_id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("seq", sa.BigInteger, sa.Identity(start=1, increment=1), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("parts", pg.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("status", sa.String(16)),
        sa.Column("error", sa.Text),
        _ts("created_at"),
        _ts("updated_at"),
    )
    op.create_index("ix_chat_messages_thread", "chat_messages", ["thread_id", "seq"])
    op.create_table(
        "chat_runs",
        sa.Column("id", sa.Uuid, primary_key=True),
        _org(),
        sa.Column(
            "thread_id",
            sa.Uuid,
            sa.ForeignKey("conversations.thread_id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "message_id",
            sa.Uuid,
            sa.ForeignKey("chat_messages.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("error", sa.Text),
        sa.Column("chunk_count", sa.Integer, nullable=False, server_default="0"),
        _ts("created_at"),
        _ts("heartbeat_at"),
        _ts("finished_at", nullable=True),
    )
    op.create_index("ix_chat_runs_thread", "chat_runs", ["thread_id", sa.text("created_at DESC")])
    op.create_index(
        "ix_chat_runs_running",
        "chat_runs",
        ["heartbeat_at"],
        postgresql_where=sa.text("status = 'in_progress'"),
    )
    op.create_table(
        "chat_run_chunks",
        sa.Column(
            "run_id",
            sa.Uuid,
            sa.ForeignKey("chat_runs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("seq", sa.Integer, primary_key=True),
        _org(),
        sa.Column("chunk", pg.JSONB, nullable=False),
    )
    op.create_table(
        "usage_events",
        sa.Column("id", sa.BigInteger, sa.Identity(start=1, increment=1), primary_key=True),
        _org(),
        sa.Column("user_id", sa.String(128)),
        sa.Column("thread_id", sa.Uuid),
        sa.Column("purpose", sa.String(32), nullable=False),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column("input_tokens", sa.Integer, nullable=False),
        sa.Column("output_tokens", sa.Integer, nullable=False),
        sa.Column("cost_usd", sa.Numeric(18, 8), nullable=False),
        sa.Column("estimated", sa.Boolean, nullable=False, server_default=sa.false()),
        _ts("created_at"),
    )
    op.create_index("ix_usage_events_org_time", "usage_events", ["org_id", "created_at"])

    for table in TENANT_TABLES:
        _secure(table, role, owner_bypass=False)
    for table in REAPED_TABLES:
        _secure(table, role, owner_bypass=True)
    op.execute(f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
    op.execute(
        """
        CREATE FUNCTION ap_reap_stalled_chat_runs(stale_after interval)
        RETURNS TABLE (org_id text, run_id uuid, thread_id uuid)
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
        DECLARE
            message text := 'The response stopped before it finished (the server producing '
                            'it went away). Send the message again to retry.';
        BEGIN
            RETURN QUERY
            WITH stalled AS (
                UPDATE chat_runs r SET status = 'failed', error = message, finished_at = now()
                WHERE r.status = 'in_progress' AND r.heartbeat_at < now() - stale_after
                RETURNING r.org_id, r.id, r.thread_id, r.message_id
            ), messages AS (
                UPDATE chat_messages m SET status = 'failed', error = message, updated_at = now()
                FROM stalled s WHERE m.id = s.message_id
            ), threads AS (
                UPDATE conversations c SET stream_status = 'failed', updated_at = now()
                FROM stalled s
                WHERE c.thread_id = s.thread_id AND c.stream_status = 'in_progress'
            )
            SELECT s.org_id::text, s.id, s.thread_id FROM stalled s;
        END $$
        """
    )
    op.execute("REVOKE ALL ON FUNCTION ap_reap_stalled_chat_runs(interval) FROM PUBLIC")
    op.execute(f'GRANT EXECUTE ON FUNCTION ap_reap_stalled_chat_runs(interval) TO "{role}"')


def _secure(table: str, role: str, *, owner_bypass: bool) -> None:
    op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    check = "org_id = current_setting('app.org_id', true)"
    if owner_bypass:
        check += (
            f" OR current_user = (SELECT tableowner FROM pg_tables WHERE tablename = '{table}')"
        )
    op.execute(f"CREATE POLICY org_isolation ON {table} USING ({check}) WITH CHECK ({check})")
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO "{role}"')


def downgrade() -> None:
    op.execute("DROP FUNCTION ap_reap_stalled_chat_runs(interval)")
    for table in (
        "usage_events",
        "chat_run_chunks",
        "chat_runs",
        "chat_messages",
        "conversations",
        "agent_tag_links",
        "agent_knowledge_bases",
        "agents",
        "agent_tags",
    ):
        op.drop_table(table)
