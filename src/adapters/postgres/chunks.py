"""Passages and hybrid search in Postgres: pgvector HNSW plus full text, fused by rank.

Vector search runs once per (model, dimension count), and its plan is chosen here, per scope,
from the number of passages the scope holds (`knowledge_base_stats.chunk_count`, kept by
triggers from each file's `chunk_count`, which `replace_for_file` writes with the passages):

- up to `exact_threshold` passages, an exact search: the distance is written without the
  `vector(N)` cast that the HNSW index is built on, so no plan can use the index; the scope's
  rows come through the B-tree `ix_chunks_scope` and are sorted by distance. Exact answers,
  whatever the size of the table, in time proportional to the scope.
- above it, the dimension count's partial HNSW index with pgvector 0.8's iterative scan
  (`relaxed_order`, set when the connection is scoped). `hnsw.ef_search` and
  `hnsw.max_scan_tuples` grow as the scope's share of the index (its selectivity) shrinks, and
  `enable_sort` is off for that statement so that the planner, which underestimates a
  knowledge base's rows, does not fall back to a sort over a large scope. The settings are
  `SET LOCAL` in a transaction of their own (or restored after, inside the caller's).

The index's row count (the selectivity's denominator) is the index's `pg_class.reltuples`,
kept by VACUUM / ANALYZE (autovacuum included): a catalog read, never a scan of `chunks`.
Full-text search runs over the same knowledge bases, and the rankings are merged by
reciprocal rank fusion (k = 60).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import asyncpg

from adapters.postgres.database import OrgConnection
from application.ports.chunk_repository import EmbeddedChunk, SearchScope
from domain.chunks import SearchResult, TextChunk

RRF_K = 60
EXACT_THRESHOLD = 50_000
"""Scopes of at most this many passages are searched exactly: about 1 µs a passage, under
the 100 ms p99 target with margin (BENCHMARKS.md, "Search at scale")."""
EF_SEARCH_MIN = 400  # an unfiltered top 10 over 1,000,000 passages: recall@10 ~0.98
EF_SEARCH_MAX = 1000  # pgvector's upper bound for hnsw.ef_search
MAX_SCAN_TUPLES_MIN = 20_000  # pgvector's default
MAX_SCAN_TUPLES_MAX = 200_000
_ensured_dimensions: set[int] = set()

DELETE_FILE_CHUNKS = (
    "DELETE FROM chunks WHERE org_id = $1 AND file_record_id = $2 AND embedding_model = $3"
)
INSERT_CHUNK = """
    INSERT INTO chunks (org_id, knowledge_base_id, file_record_id, embedding_model, dimensions,
        chunk_index, page_number, start_char, end_char, text, embedding)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"""
# The file's passage count, for the knowledge base's current model only (as migration 0013's
# backfill counts it): passages written for a pending model count once the knowledge base
# switches to it (`delete_for_knowledge_base`). Written last, so that the knowledge base's
# `knowledge_base_stats` row, which the trigger updates, stays locked for as short a time as
# the transaction allows.
SET_FILE_CHUNK_COUNT = """
    UPDATE knowledge_base_files f SET chunk_count = $3
    FROM knowledge_bases kb
    WHERE f.org_id = $1 AND f.id = $2 AND kb.id = f.knowledge_base_id
      AND kb.embedding_model = $4 AND f.chunk_count <> $3"""
RECOUNT_KNOWLEDGE_BASE = """
    UPDATE knowledge_base_files f SET chunk_count = n.count
    FROM (SELECT f2.id, (SELECT count(*) FROM chunks c
                         WHERE c.file_record_id = f2.id AND c.embedding_model = $3) AS count
          FROM knowledge_base_files f2
          WHERE f2.org_id = $1 AND f2.knowledge_base_id = $2) n
    WHERE f.id = n.id AND f.chunk_count <> n.count"""
FULL_TEXT = """
    SELECT c.id FROM chunks c, websearch_to_tsquery('simple', $4) q
    WHERE c.org_id = $1
      AND (c.knowledge_base_id, c.embedding_model) IN (
          SELECT * FROM unnest($2::bigint[], $3::text[]))
      AND c.tsv @@ q
    ORDER BY ts_rank_cd(c.tsv, q) DESC, c.id
    LIMIT $5"""
PASSAGES = """
    SELECT chunk_index, text, page_number, start_char, end_char FROM chunks
    WHERE org_id = $1 AND file_record_id = $2 AND embedding_model = $3 ORDER BY chunk_index"""
DELETE_OTHER_MODELS = """
    DELETE FROM chunks WHERE org_id = $1 AND knowledge_base_id = $2 AND embedding_model <> $3"""
DETAILS = """
    SELECT c.id, c.text, c.page_number, c.knowledge_base_id, f.file_id::text, f.file_name
    FROM chunks c JOIN knowledge_base_files f ON f.id = c.file_record_id
    WHERE c.org_id = $1 AND c.id = ANY($2::bigint[])"""
# The scope's passages (its knowledge bases' totals, row-level security applies) and the rows
# of the dimension count's HNSW index (the planner's estimate, -1 before the first ANALYZE).
SCOPE_SIZE = """
    SELECT coalesce(sum(s.chunk_count), 0)::bigint,
           (SELECT i.reltuples::float8 FROM pg_class i WHERE i.oid = to_regclass($2))
    FROM knowledge_base_stats s WHERE s.knowledge_base_id = ANY($1::bigint[])"""
# For the HNSW statement: read the settings (to restore them inside a caller's transaction;
# NULL before pgvector is loaded in the session, restored as its defaults) and set them for
# the transaction.
HNSW_SETTINGS = """
    SELECT current_setting('hnsw.ef_search', true), current_setting('hnsw.max_scan_tuples', true),
           current_setting('enable_sort'),
           set_config('hnsw.ef_search', $1, true), set_config('hnsw.max_scan_tuples', $2, true),
           set_config('enable_sort', 'off', true)"""
RESTORE_SETTINGS = """
    SELECT set_config('hnsw.ef_search', coalesce($1, '40'), true),
           set_config('hnsw.max_scan_tuples', coalesce($2, '20000'), true),
           set_config('enable_sort', $3, true)"""


async def ensure_chunk_index(db: OrgConnection, dimensions: int) -> None:
    """Make sure the HNSW index for that dimension count exists (once per process)."""
    if dimensions not in _ensured_dimensions:
        await db.execute("SELECT ap_ensure_chunk_index($1)", dimensions)
        _ensured_dimensions.add(dimensions)


def _checked(dimensions: int) -> int:
    if not 1 <= int(dimensions) <= 4000:
        raise ValueError(f"unsupported dimension count: {dimensions}")
    return int(dimensions)


def index_name(dimensions: int) -> str:
    """The dimension count's partial HNSW index (migration 0002's `ap_ensure_chunk_index`)."""
    return f"ix_chunks_embedding_{_checked(dimensions)}"


def nearest_statement(dimensions: int) -> str:
    """The vector query on the HNSW index for one dimension count (an integer, checked: part
    of the SQL): ordered by the index's own expression, `embedding::vector(N)`."""
    dims = _checked(dimensions)
    kind = "halfvec" if dims > 2000 else "vector"
    cast = f"{kind}({dims})"
    return f"""
        SELECT id FROM (
            SELECT c.id, c.embedding::{cast} <=> ($4::vector)::{cast} AS distance
            FROM chunks c
            WHERE c.dimensions = {dims} AND c.org_id = $1
              AND c.knowledge_base_id = ANY($2::bigint[]) AND c.embedding_model = $3
            ORDER BY c.embedding::{cast} <=> ($4::vector)::{cast}
            LIMIT $5
        ) nearest ORDER BY distance, id"""


def exact_statement(dimensions: int) -> str:
    """The exact vector query for one dimension count: the distance on the uncast column,
    which matches no index expression, so the plan reads the scope's rows (B-tree
    `ix_chunks_scope`) and sorts them; ties broken by id."""
    dims = _checked(dimensions)
    return f"""
        SELECT c.id FROM chunks c
        WHERE c.dimensions = {dims} AND c.org_id = $1
          AND c.knowledge_base_id = ANY($2::bigint[]) AND c.embedding_model = $3
        ORDER BY c.embedding <=> $4::vector, c.id
        LIMIT $5"""


def hnsw_settings(scope_rows: int, index_rows: float, limit: int) -> tuple[int, int]:
    """`hnsw.ef_search` and `hnsw.max_scan_tuples` for a scope of `scope_rows` passages in an
    index of `index_rows`. ef_search = max(400, 2 * limit) / selectivity, at most 1000: 400 is
    what an unfiltered top 10 over 1,000,000 passages needs for recall@10 >= 0.95
    (BENCHMARKS.md), and a filtered scan should see as many of the scope's own passages. The
    iterative scan may visit 20 x limit / selectivity rows (at least pgvector's default
    20,000, at most 200,000) before it stops."""
    rows = max(float(index_rows), float(scope_rows), 1.0)
    selectivity = max(scope_rows, 1) / rows
    floor = max(EF_SEARCH_MIN, 2 * limit)
    ef = min(EF_SEARCH_MAX, math.ceil(floor / selectivity))
    scan = min(MAX_SCAN_TUPLES_MAX, max(MAX_SCAN_TUPLES_MIN, math.ceil(20 * limit / selectivity)))
    return ef, scan


class PgChunkRepository:
    """`ChunkRepository` in Postgres with pgvector."""

    exact_threshold: int = EXACT_THRESHOLD
    """Scopes of at most this many passages are searched exactly (tests lower it)."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def replace_for_file(
        self,
        org_id: str,
        *,
        knowledge_base_id: int,
        file_record_id: int,
        embedding_model: str,
        dimensions: int,
        chunks: Sequence[EmbeddedChunk],
    ) -> None:
        await self._db.begin()
        await ensure_chunk_index(self._db, dimensions)
        await self._db.execute(DELETE_FILE_CHUNKS, org_id, file_record_id, embedding_model)
        if chunks:
            await self._db.raw.executemany(
                INSERT_CHUNK,
                [
                    (
                        org_id,
                        knowledge_base_id,
                        file_record_id,
                        embedding_model,
                        dimensions,
                        item.chunk.index,
                        item.chunk.page_number,
                        item.chunk.start_char,
                        item.chunk.end_char,
                        item.chunk.text,
                        item.vector,
                    )
                    for item in chunks
                ],
            )
        await self._db.execute(
            SET_FILE_CHUNK_COUNT, org_id, file_record_id, len(chunks), embedding_model
        )

    async def passages_for_file(
        self, org_id: str, file_record_id: int, embedding_model: str
    ) -> list[TextChunk]:
        rows = await self._db.fetch(PASSAGES, org_id, file_record_id, embedding_model)
        return [
            TextChunk(index=r[0], text=r[1], page_number=r[2], start_char=r[3], end_char=r[4])
            for r in rows
        ]

    async def delete_for_knowledge_base(
        self, org_id: str, knowledge_base_id: int, *, except_model: str
    ) -> None:
        status = await self._db.execute(
            DELETE_OTHER_MODELS, org_id, knowledge_base_id, except_model
        )
        if status != "DELETE 0":
            # The knowledge base now holds `except_model`'s passages only: its files' counts
            # become theirs (the switch to a re-embedding's model lands here).
            await self._db.execute(RECOUNT_KNOWLEDGE_BASE, org_id, knowledge_base_id, except_model)

    async def nearest(self, org_id: str, scope: SearchScope, limit: int) -> list[int]:
        """The ids of the scope's `limit` passages nearest to its query vector: exact for a
        scope of at most `exact_threshold` passages, else on the HNSW index."""
        row = await self._db.fetch(
            SCOPE_SIZE, scope.knowledge_base_ids, index_name(scope.dimensions)
        )
        scope_rows, index_rows = int(row[0][0]), row[0][1]
        args = (org_id, scope.knowledge_base_ids, scope.embedding_model, scope.query_vector, limit)
        if scope_rows <= self.exact_threshold:
            rows = await self._db.fetch(exact_statement(scope.dimensions), *args)
            return [r[0] for r in rows]
        ef, scan = hnsw_settings(scope_rows, index_rows or 0.0, limit)
        return await self._on_index(nearest_statement(scope.dimensions), ef, scan, args)

    async def _on_index(self, sql: str, ef: int, scan: int, args: tuple[Any, ...]) -> list[int]:
        connection: asyncpg.Connection = self._db.raw
        if not self._db.in_transaction:
            async with connection.transaction(readonly=True):
                await connection.execute(HNSW_SETTINGS, str(ef), str(scan))
                rows = await connection.fetch(sql, *args)
            return [r[0] for r in rows]
        saved = await connection.fetchrow(HNSW_SETTINGS, str(ef), str(scan))
        try:
            rows = await connection.fetch(sql, *args)
        finally:
            await connection.execute(RESTORE_SETTINGS, saved[0], saved[1], saved[2])
        return [r[0] for r in rows]

    async def search(
        self, org_id: str, *, query: str, scopes: Sequence[SearchScope], top_k: int
    ) -> list[SearchResult]:
        depth = max(top_k * 4, 40)
        rankings: list[list[int]] = []
        for scope in scopes:
            rankings.append(await self.nearest(org_id, scope, depth))
        kb_ids = [kb for scope in scopes for kb in scope.knowledge_base_ids]
        models = [scope.embedding_model for scope in scopes for _ in scope.knowledge_base_ids]
        if query.strip():
            rows = await self._db.fetch(FULL_TEXT, org_id, kb_ids, models, query, depth)
            rankings.append([row[0] for row in rows])
        scores: dict[int, float] = {}
        for ranking in rankings:
            for rank, chunk_id in enumerate(ranking, start=1):
                scores[chunk_id] = scores.get(chunk_id, 0.0) + 1.0 / (RRF_K + rank)
        best = sorted(scores, key=lambda chunk_id: (-scores[chunk_id], chunk_id))[:top_k]
        if not best:
            return []
        details = {row[0]: row for row in await self._db.fetch(DETAILS, org_id, best)}
        return [
            SearchResult(
                chunk_id=chunk_id,
                text=details[chunk_id][1],
                page_number=details[chunk_id][2],
                knowledge_base_id=details[chunk_id][3],
                file_id=details[chunk_id][4],
                file_name=details[chunk_id][5],
                score=round(scores[chunk_id], 6),
            )
            for chunk_id in best
            if chunk_id in details
        ]
