"""Large files embedded in parts: the staged parts and their vectors; the reaper counts part
jobs as live work.

A file with many passages is staged in parts (`embedding_parts`), each embedded by its own
job; the vectors of finished parts wait in `staged_chunks` (no vector index: never searched)
until the last part moves them all into `chunks` in one transaction.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql as pg

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

NON_TERMINAL = "('parsing', 'parsed', 'chunking')"
TABLES = ("embedding_parts", "staged_chunks")


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def _reaper(live_jobs: str) -> str:
    return f"""
        CREATE OR REPLACE FUNCTION ap_reap_stalled_files(stale_after interval)
        RETURNS TABLE (org_id text, file_record_id bigint, processing_status text)
        LANGUAGE sql SECURITY DEFINER SET search_path = public, pg_temp AS $$
            UPDATE knowledge_base_files f SET
                processing_status = CASE WHEN f.processing_status = 'parsing'
                                         THEN 'parse_failed' ELSE 'chunk_failed' END,
                processing_error = 'Processing stopped before it finished. '
                                   'Reprocess the file to try again.',
                updated_at = now()
            WHERE f.processing_status IN {NON_TERMINAL}
              AND f.updated_at < now() - stale_after
              AND NOT EXISTS ({live_jobs})
            RETURNING f.org_id::text, f.id, f.processing_status::text
        $$
        """


def upgrade() -> None:
    role = app_role()
    op.create_table(
        "embedding_parts",
        sa.Column("id", sa.BigInteger, sa.Identity(start=1, increment=1), primary_key=True),
        sa.Column("org_id", sa.String(128), nullable=False),
        sa.Column(
            "file_record_id",
            sa.BigInteger,
            sa.ForeignKey("knowledge_base_files.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("part", sa.Integer, nullable=False),
        sa.Column("models", pg.JSONB, nullable=False),
        sa.Column("passages", pg.JSONB, nullable=False),
        sa.Column("starts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("done", sa.Boolean, nullable=False, server_default=sa.text("false")),
    )
    op.create_index("ix_embedding_parts_file", "embedding_parts", ["file_record_id", "done"])
    op.create_table(
        "staged_chunks",
        sa.Column(
            "part_id",
            sa.BigInteger,
            sa.ForeignKey("embedding_parts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("org_id", sa.String(128), nullable=False),
        sa.Column("file_record_id", sa.BigInteger, nullable=False),
        sa.Column("embedding_model", sa.String(255), nullable=False),
        sa.Column("dimensions", sa.Integer, nullable=False),
        sa.Column("chunk_index", sa.Integer, nullable=False),
        sa.Column("page_number", sa.Integer),
        sa.Column("start_char", sa.Integer, nullable=False),
        sa.Column("end_char", sa.Integer, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("embedding", Vector(), nullable=False),
        sa.PrimaryKeyConstraint("part_id", "embedding_model", "chunk_index"),
    )
    op.create_index("ix_staged_chunks_file", "staged_chunks", ["file_record_id"])
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY org_isolation ON {table} "
            "USING (org_id = current_setting('app.org_id', true)) "
            "WITH CHECK (org_id = current_setting('app.org_id', true))"
        )
        op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO "{role}"')
    op.execute(f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
    # A file embedded in parts has no `file.process` job while its parts run.
    op.execute(
        _reaper(
            "SELECT 1 FROM pgqueuer q WHERE q.dedupe_key = 'file.process:' || f.id "
            "OR q.dedupe_key LIKE 'file.embed:' || f.id || ':%'"
        )
    )


def downgrade() -> None:
    op.execute(_reaper("SELECT 1 FROM pgqueuer q WHERE q.dedupe_key = 'file.process:' || f.id"))
    op.drop_table("staged_chunks")
    op.drop_table("embedding_parts")
