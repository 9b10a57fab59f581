"""Knowledge-base totals kept as files change, so listing knowledge bases scans no file.

`knowledge_base_stats` holds, per knowledge base, its file count, total bytes, files still
processing, newest upload and passage count. A row trigger on `knowledge_base_files` keeps it
(insert, delete, and the updates that change a total: size, crossing between a processing and
a terminal state, passage count), with the invoker's rights, like the usage roll-up of 0009: the
app role writes its own organization's row, the owner (the reaper) any. A file's passage count
(`knowledge_base_files.chunk_count`) is written by the chunk repository with its passages; the
search reads the knowledge base's total to choose between an exact scan and the HNSW index.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-23
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# Frozen here: the states after which a file no longer counts as processing.
TERMINAL = "('completed', 'parse_failed', 'chunk_failed', 'extract_failed')"
OWNER = "current_user = (SELECT tableowner FROM pg_tables WHERE tablename = 'knowledge_base_stats')"


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def upgrade() -> None:
    role = app_role()
    op.add_column(
        "knowledge_base_files",
        sa.Column("chunk_count", sa.Integer, nullable=False, server_default="0"),
    )
    op.create_table(
        "knowledge_base_stats",
        sa.Column(
            "knowledge_base_id",
            sa.BigInteger,
            sa.ForeignKey("knowledge_bases.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("org_id", sa.String(128), nullable=False),
        sa.Column("file_count", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("total_size", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("files_in_progress", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("chunk_count", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("last_file_uploaded_at", sa.DateTime(timezone=True)),
    )
    # The backfill reads every organization's rows as the owner, which forced row-level
    # security would hide from it; forced again at the end.
    for table in ("knowledge_bases", "chunks"):
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
    op.execute(
        """
        UPDATE knowledge_base_files f SET chunk_count = c.n
        FROM (SELECT ch.file_record_id, count(*) AS n
              FROM chunks ch JOIN knowledge_bases kb ON kb.id = ch.knowledge_base_id
              WHERE ch.embedding_model = kb.embedding_model GROUP BY 1) c
        WHERE f.id = c.file_record_id
        """
    )
    op.execute(
        f"""
        INSERT INTO knowledge_base_stats (knowledge_base_id, org_id, file_count, total_size,
            files_in_progress, chunk_count, last_file_uploaded_at)
        SELECT kb.id, kb.org_id, count(f.id), coalesce(sum(f.file_size), 0),
               count(f.id) FILTER (WHERE f.processing_status NOT IN {TERMINAL}),
               coalesce(sum(f.chunk_count), 0), max(f.created_at)
        FROM knowledge_bases kb JOIN knowledge_base_files f ON f.knowledge_base_id = kb.id
        GROUP BY kb.id, kb.org_id
        """
    )
    for table in ("knowledge_bases", "chunks"):
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    op.execute(
        f"""
        CREATE FUNCTION ap_roll_up_files() RETURNS trigger
        LANGUAGE plpgsql SET search_path = public AS $$
        DECLARE
            newest timestamptz;
        BEGIN
            IF TG_OP IN ('UPDATE', 'DELETE') THEN
                UPDATE knowledge_base_stats SET
                    file_count = file_count - 1,
                    total_size = total_size - coalesce(OLD.file_size, 0),
                    files_in_progress = files_in_progress
                        - (OLD.processing_status NOT IN {TERMINAL})::int,
                    chunk_count = chunk_count - OLD.chunk_count
                WHERE knowledge_base_id = OLD.knowledge_base_id
                RETURNING last_file_uploaded_at INTO newest;
                -- The newest file gone: the next newest, found through the (org, knowledge
                -- base, created_at) index. Skipped when the knowledge base itself is gone.
                IF TG_OP = 'DELETE' AND FOUND AND OLD.created_at >= newest THEN
                    UPDATE knowledge_base_stats SET last_file_uploaded_at = (
                        SELECT max(f.created_at) FROM knowledge_base_files f
                        WHERE f.org_id = OLD.org_id
                          AND f.knowledge_base_id = OLD.knowledge_base_id)
                    WHERE knowledge_base_id = OLD.knowledge_base_id;
                END IF;
            END IF;
            IF TG_OP IN ('INSERT', 'UPDATE') THEN
                INSERT INTO knowledge_base_stats AS s (knowledge_base_id, org_id, file_count,
                    total_size, files_in_progress, chunk_count, last_file_uploaded_at)
                VALUES (NEW.knowledge_base_id, NEW.org_id, 1, coalesce(NEW.file_size, 0),
                        (NEW.processing_status NOT IN {TERMINAL})::int, NEW.chunk_count,
                        NEW.created_at)
                ON CONFLICT (knowledge_base_id) DO UPDATE SET
                    file_count = s.file_count + 1,
                    total_size = s.total_size + EXCLUDED.total_size,
                    files_in_progress = s.files_in_progress + EXCLUDED.files_in_progress,
                    chunk_count = s.chunk_count + EXCLUDED.chunk_count,
                    last_file_uploaded_at = greatest(s.last_file_uploaded_at,
                                                     EXCLUDED.last_file_uploaded_at);
            END IF;
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER knowledge_base_files_roll_up AFTER INSERT OR DELETE "
        "ON knowledge_base_files FOR EACH ROW EXECUTE FUNCTION ap_roll_up_files()"
    )
    # Only the updates that move a total: most status changes (parsing -> parsed -> chunking)
    # and every other column touch no total, and so take no lock on the knowledge base's row.
    op.execute(
        f"""
        CREATE TRIGGER knowledge_base_files_roll_up_change AFTER UPDATE ON knowledge_base_files
        FOR EACH ROW WHEN (
            OLD.knowledge_base_id IS DISTINCT FROM NEW.knowledge_base_id
            OR OLD.file_size IS DISTINCT FROM NEW.file_size
            OR OLD.chunk_count IS DISTINCT FROM NEW.chunk_count
            OR (OLD.processing_status NOT IN {TERMINAL})
               IS DISTINCT FROM (NEW.processing_status NOT IN {TERMINAL}))
        EXECUTE FUNCTION ap_roll_up_files()
        """
    )
    op.execute("ALTER TABLE knowledge_base_stats ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE knowledge_base_stats FORCE ROW LEVEL SECURITY")
    check = f"org_id = current_setting('app.org_id', true) OR {OWNER}"
    op.execute(
        f"CREATE POLICY org_isolation ON knowledge_base_stats USING ({check}) WITH CHECK ({check})"
    )
    op.execute(f'GRANT SELECT, INSERT, UPDATE ON knowledge_base_stats TO "{role}"')


def downgrade() -> None:
    op.execute("DROP TRIGGER knowledge_base_files_roll_up_change ON knowledge_base_files")
    op.execute("DROP TRIGGER knowledge_base_files_roll_up ON knowledge_base_files")
    op.execute("DROP FUNCTION ap_roll_up_files()")
    op.drop_table("knowledge_base_stats")
    op.drop_column("knowledge_base_files", "chunk_count")
