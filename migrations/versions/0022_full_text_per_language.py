"""Full-text search that works for questions: stemmed per the knowledge base's language, with an
inverted index for BM25.

Until now a passage's `tsv` was `to_tsvector('simple', text)`, generated: no stemming, no stop
words. Now each knowledge base has a `language` (a PostgreSQL text-search configuration of
`pg_catalog`: english by default, or simple for none), and a row trigger writes a passage's
`tsv` in its knowledge base's language, with `term_count`, the words it counts (BM25's document
length), whenever a passage is inserted or its text rewritten; a language change rewrites its
knowledge base's passages (`UPDATE chunks SET text = text`). Existing passages are rewritten
here in english.

`chunk_terms` is the inverted index BM25 reads: one row per (passage, lexeme) with the lexeme's
count in the passage (`tf`) and the passage's length (`dl`), written by a trigger from `tsv`
(and removed with the passage). Its covering index on (knowledge base, lexeme) answers a query's
postings, document frequencies included, by index-only scans, where reading `tsv` itself would
detoast every matching passage. Row-level security as for `chunks`.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import TSVECTOR

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def upgrade() -> None:
    role = app_role()
    op.add_column(
        "knowledge_bases",
        sa.Column("language", sa.String(32), nullable=False, server_default="english"),
    )
    op.execute("ALTER TABLE chunks ALTER COLUMN tsv DROP EXPRESSION")
    op.add_column("chunks", sa.Column("term_count", sa.Integer, nullable=False, server_default="0"))
    op.execute(
        """
        CREATE FUNCTION ap_term_count(tsvector) RETURNS integer
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
            SELECT coalesce(sum(cardinality(u.positions)), 0)::integer FROM unnest($1) u
        $$
        """
    )
    # With the invoker's rights: the passage's own organization's knowledge base is visible to
    # it. Only pg_catalog's configurations are reachable, whatever the search path.
    op.execute(
        """
        CREATE FUNCTION ap_chunk_text_search() RETURNS trigger
        LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
        DECLARE
            config regconfig;
        BEGIN
            SELECT ('pg_catalog.' || quote_ident(kb.language))::regconfig INTO config
            FROM knowledge_bases kb WHERE kb.id = NEW.knowledge_base_id;
            NEW.tsv := to_tsvector(coalesce(config, 'pg_catalog.english'::regconfig), NEW.text);
            NEW.term_count := ap_term_count(NEW.tsv);
            RETURN NEW;
        END
        $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER chunks_text_search BEFORE INSERT OR UPDATE OF text ON chunks
        FOR EACH ROW EXECUTE FUNCTION ap_chunk_text_search()
        """
    )
    op.create_table(
        "chunk_terms",
        sa.Column(
            "chunk_id",
            sa.BigInteger,
            sa.ForeignKey("chunks.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("lexeme", sa.Text, primary_key=True),
        sa.Column("org_id", sa.String(128), nullable=False),
        sa.Column("knowledge_base_id", sa.BigInteger, nullable=False),
        sa.Column("embedding_model", sa.String(255), nullable=False),
        sa.Column("file_record_id", sa.BigInteger, nullable=False),
        sa.Column("tf", sa.Integer, nullable=False),
        sa.Column("dl", sa.Integer, nullable=False),
    )
    op.create_index(
        "ix_chunk_terms_postings",
        "chunk_terms",
        ["knowledge_base_id", "lexeme"],
        postgresql_include=["embedding_model", "org_id", "chunk_id", "tf", "dl", "file_record_id"],
    )
    op.execute("ALTER TABLE chunk_terms ENABLE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY org_isolation ON chunk_terms "
        "USING (org_id = current_setting('app.org_id', true)) "
        "WITH CHECK (org_id = current_setting('app.org_id', true))"
    )
    op.execute(f'GRANT SELECT, INSERT, DELETE ON chunk_terms TO "{role}"')
    op.execute(
        """
        CREATE FUNCTION ap_chunk_terms() RETURNS trigger
        LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
        BEGIN
            IF TG_OP = 'UPDATE' THEN
                DELETE FROM chunk_terms WHERE chunk_id = NEW.id;
            END IF;
            INSERT INTO chunk_terms (chunk_id, lexeme, org_id, knowledge_base_id,
                                     embedding_model, file_record_id, tf, dl)
            SELECT NEW.id, u.lexeme, NEW.org_id, NEW.knowledge_base_id, NEW.embedding_model,
                   NEW.file_record_id, coalesce(cardinality(u.positions), 1), NEW.term_count
            FROM unnest(NEW.tsv) u;
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER chunks_terms AFTER INSERT OR UPDATE OF text ON chunks
        FOR EACH ROW EXECUTE FUNCTION ap_chunk_terms()
        """
    )
    op.execute("ALTER TABLE chunks NO FORCE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE knowledge_bases NO FORCE ROW LEVEL SECURITY")
    op.execute("UPDATE chunks SET text = text")
    # Forced once the backfill, which writes every organization's postings, is done.
    op.execute("ALTER TABLE chunk_terms FORCE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE knowledge_bases FORCE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE chunks FORCE ROW LEVEL SECURITY")


def downgrade() -> None:
    op.execute("DROP TRIGGER chunks_terms ON chunks")
    op.execute("DROP FUNCTION ap_chunk_terms()")
    op.drop_table("chunk_terms")
    op.execute("DROP TRIGGER chunks_text_search ON chunks")
    op.execute("DROP FUNCTION ap_chunk_text_search()")
    op.execute("DROP FUNCTION ap_term_count(tsvector)")
    op.drop_column("chunks", "term_count")
    op.drop_index("ix_chunks_tsv", table_name="chunks")
    op.drop_column("chunks", "tsv")
    op.add_column(
        "chunks",
        sa.Column("tsv", TSVECTOR, sa.Computed("to_tsvector('simple', text)", persisted=True)),
    )
    op.create_index("ix_chunks_tsv", "chunks", ["tsv"], postgresql_using="gin")
    op.drop_column("knowledge_bases", "language")
