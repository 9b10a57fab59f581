"""Chunks with embeddings and full text, chunking settings, processing attempts, the reaper.

Vectors of every dimension count share one `embedding vector` column. Each dimension count
gets a partial HNSW expression index (`embedding::vector(N)` where `dimensions = N`; halfvec
above 2000 dimensions, pgvector's limit for vector indexes), created here for the common
sizes and on demand for others through `ap_ensure_chunk_index`, which runs as the owner.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql as pg

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

COMMON_DIMENSIONS = (384, 768, 1024, 1536, 3072)
NON_TERMINAL = "('parsing', 'parsed', 'chunking')"


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def upgrade() -> None:
    role = app_role()
    op.add_column(
        "knowledge_bases",
        sa.Column("chunk_size", sa.Integer, nullable=False, server_default="256"),
    )
    op.add_column(
        "knowledge_bases",
        sa.Column("chunk_overlap", sa.Integer, nullable=False, server_default="32"),
    )
    op.add_column(
        "knowledge_base_files",
        sa.Column("processing_attempts", sa.Integer, nullable=False, server_default="0"),
    )
    op.create_table(
        "chunks",
        sa.Column("id", sa.BigInteger, sa.Identity(start=1, increment=1), primary_key=True),
        sa.Column("org_id", sa.String(128), nullable=False),
        sa.Column(
            "knowledge_base_id",
            sa.BigInteger,
            sa.ForeignKey("knowledge_bases.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "file_record_id",
            sa.BigInteger,
            sa.ForeignKey("knowledge_base_files.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("embedding_model", sa.String(255), nullable=False),
        sa.Column("dimensions", sa.Integer, nullable=False),
        sa.Column("chunk_index", sa.Integer, nullable=False),
        sa.Column("page_number", sa.Integer),
        sa.Column("start_char", sa.Integer, nullable=False),
        sa.Column("end_char", sa.Integer, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("embedding", Vector(), nullable=False),
        sa.Column(
            "tsv",
            pg.TSVECTOR,
            sa.Computed("to_tsvector('simple', text)", persisted=True),
            nullable=False,
        ),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint("vector_dims(embedding) = dimensions", name="ck_chunks_dimensions"),
    )
    op.create_index("ix_chunks_scope", "chunks", ["org_id", "knowledge_base_id", "embedding_model"])
    op.create_index("ix_chunks_file", "chunks", ["file_record_id", "embedding_model"])
    op.create_index("ix_chunks_tsv", "chunks", ["tsv"], postgresql_using="gin")
    op.execute("ALTER TABLE chunks ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE chunks FORCE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY org_isolation ON chunks "
        "USING (org_id = current_setting('app.org_id', true)) "
        "WITH CHECK (org_id = current_setting('app.org_id', true))"
    )
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON chunks TO "{role}"')
    op.execute(f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO "{role}"')

    op.execute(
        """
        CREATE FUNCTION ap_ensure_chunk_index(dims integer) RETURNS void
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
        DECLARE
            kind text := CASE WHEN dims > 2000 THEN 'halfvec' ELSE 'vector' END;
        BEGIN
            IF dims IS NULL OR dims < 1 OR dims > 4000 THEN
                RAISE EXCEPTION 'unsupported dimension count: %', dims;
            END IF;
            IF to_regclass(format('public.ix_chunks_embedding_%s', dims)) IS NULL THEN
                EXECUTE format(
                    'CREATE INDEX IF NOT EXISTS ix_chunks_embedding_%1$s ON chunks USING hnsw '
                    '((embedding::%2$s(%1$s)) %2$s_cosine_ops) WHERE dimensions = %1$s',
                    dims, kind);
            END IF;
        END $$
        """
    )
    op.execute("REVOKE ALL ON FUNCTION ap_ensure_chunk_index(integer) FROM PUBLIC")
    op.execute(f'GRANT EXECUTE ON FUNCTION ap_ensure_chunk_index(integer) TO "{role}"')
    for dims in COMMON_DIMENSIONS:
        op.execute(f"SELECT ap_ensure_chunk_index({dims})")

    # The reaper: files left in a non-terminal state with no job queued or running for them
    # (a job lost to an outage or a manual clean-up) end in their failure state. It spans
    # organizations, so it runs as the owner, and the policy lets the owner through.
    op.execute("DROP POLICY org_isolation ON knowledge_base_files")
    op.execute(
        "CREATE POLICY org_isolation ON knowledge_base_files "
        "USING (org_id = current_setting('app.org_id', true) OR current_user = "
        "(SELECT tableowner FROM pg_tables WHERE tablename = 'knowledge_base_files'))"
        " WITH CHECK (org_id = current_setting('app.org_id', true) OR current_user = "
        "(SELECT tableowner FROM pg_tables WHERE tablename = 'knowledge_base_files'))"
    )
    op.execute(
        f"""
        CREATE FUNCTION ap_reap_stalled_files(stale_after interval)
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
              AND NOT EXISTS (
                  SELECT 1 FROM pgqueuer q WHERE q.dedupe_key = 'file.process:' || f.id)
            RETURNING f.org_id::text, f.id, f.processing_status::text
        $$
        """
    )
    op.execute("REVOKE ALL ON FUNCTION ap_reap_stalled_files(interval) FROM PUBLIC")
    op.execute(f'GRANT EXECUTE ON FUNCTION ap_reap_stalled_files(interval) TO "{role}"')


def downgrade() -> None:
    op.execute("DROP FUNCTION ap_reap_stalled_files(interval)")
    op.execute("DROP POLICY org_isolation ON knowledge_base_files")
    op.execute(
        "CREATE POLICY org_isolation ON knowledge_base_files "
        "USING (org_id = current_setting('app.org_id', true)) "
        "WITH CHECK (org_id = current_setting('app.org_id', true))"
    )
    op.execute("DROP FUNCTION ap_ensure_chunk_index(integer)")
    op.drop_table("chunks")
    op.drop_column("knowledge_base_files", "processing_attempts")
    op.drop_column("knowledge_bases", "chunk_overlap")
    op.drop_column("knowledge_bases", "chunk_size")
