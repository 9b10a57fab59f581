"""Embeddings kept inline, and the vector search's HNSW statements run with their settings.

- `chunks.embedding` is stored MAIN instead of pgvector's EXTERNAL: a passage of a few hundred
  characters made the row pass the 2 kB TOAST threshold, and Postgres moved the largest
  out-of-line value, the embedding, to the TOAST table, so an exact search read two tuples
  per passage (about 5 times slower, BENCHMARKS.md "Search at scale"). Now the text and its
  tsvector go out of line first. Rows written before keep their layout until rewritten.
- `ap_hnsw_nearest` runs one vector statement with `hnsw.ef_search`, `hnsw.max_scan_tuples`
  and `enable_sort = off`, restored when it returns (the function's SET clauses): one round
  trip instead of a transaction around `SET LOCAL`. It runs with the caller's rights, so
  row-level security applies as to any statement of the app role.

The HNSW indexes of single knowledge bases (`ix_chunks_kb_<id>_<dims>`) are not created here:
the worker builds them concurrently as knowledge bases grow (adapters/postgres/vector_indexes).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-23
"""

from __future__ import annotations

import os

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def upgrade() -> None:
    op.execute("ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE MAIN")
    op.execute(
        """
        CREATE FUNCTION ap_hnsw_nearest(
            ef_search integer, max_scan_tuples integer, statement text,
            org text, kb_ids bigint[], model text, query vector, lim integer)
        RETURNS TABLE (id bigint, distance double precision)
        LANGUAGE plpgsql
        SET enable_sort = off
        SET hnsw.ef_search = 40
        SET hnsw.max_scan_tuples = 20000
        AS $$
        BEGIN
            PERFORM set_config('hnsw.ef_search', ef_search::text, true),
                    set_config('hnsw.max_scan_tuples', max_scan_tuples::text, true);
            RETURN QUERY EXECUTE statement USING org, kb_ids, model, query, lim;
        END $$
        """
    )
    op.execute(
        "REVOKE ALL ON FUNCTION "
        "ap_hnsw_nearest(integer, integer, text, text, bigint[], text, vector, integer) "
        "FROM PUBLIC"
    )
    op.execute(
        "GRANT EXECUTE ON FUNCTION "
        "ap_hnsw_nearest(integer, integer, text, text, bigint[], text, vector, integer) "
        f'TO "{app_role()}"'
    )


def downgrade() -> None:
    op.execute(
        "DROP FUNCTION ap_hnsw_nearest(integer, integer, text, text, bigint[], text, vector, "
        "integer)"
    )
    for name in _dedicated_indexes():
        op.execute(f'DROP INDEX IF EXISTS "{name}"')
    op.execute("ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE EXTERNAL")


def _dedicated_indexes() -> list[str]:
    rows = op.get_bind().exec_driver_sql(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = 'chunks'::regclass AND c.relname LIKE 'ix\\_chunks\\_kb\\_%'"
    )
    return [row[0] for row in rows]
