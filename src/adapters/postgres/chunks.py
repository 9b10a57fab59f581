"""Passages and hybrid search in Postgres: pgvector HNSW plus full text, fused by rank.

Vector search runs once per (model, dimension count), and its plan is chosen here, per scope,
from the passages each knowledge base holds (`knowledge_base_stats.chunk_count`, kept by
triggers from each file's `chunk_count`, which `replace_for_file` writes with the passages) and
from the HNSW indexes that exist:

- a knowledge base with an HNSW index of its own (`ix_chunks_kb_<id>_<dims>`, built by the
  worker once it is large: vector_indexes.py) is searched on it, its id a literal in the
  statement so that the planner proves the index's predicate; `hnsw.ef_search` grows with its
  size (`ef_search_for`);
- the other knowledge bases of the scope, up to `exact_threshold` passages together, are
  searched exactly: the distance is written without the `vector(N)` cast that the HNSW indexes
  are built on, so no plan can use one; their rows come through the B-tree `ix_chunks_scope`
  and are sorted by distance. Exact answers, whatever the size of the table;
- above that, and whenever the scope is at least half of the dimension count's shared HNSW
  index, the shared index with pgvector 0.8's iterative scan (`relaxed_order`, set when the
  connection is scoped); `hnsw.ef_search` and `hnsw.max_scan_tuples` grow as the scope's share
  of the index (its selectivity) shrinks, and `enable_sort` is off for that statement so that
  the planner, which underestimates a knowledge base's rows, does not fall back to a sort over a
  large scope.

HNSW statements run through `ap_hnsw_nearest` (migration 0015), which sets those settings for
the statement alone: one round trip, inside a caller's transaction or not. The parts of a
scope searched separately are merged by distance. The shared index's row count (the
selectivity's denominator) is its `pg_class.reltuples`, kept by VACUUM / ANALYZE: a catalog
read, never a scan of `chunks`. Full-text search runs over the same knowledge bases, and the
rankings are merged by reciprocal rank fusion (k = 60).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from adapters.postgres.database import OrgConnection
from adapters.postgres.hybrid_search import HybridSearch, SearchTuning
from adapters.postgres.vector_indexes import (
    SHARED_SHARE,
    checked_dimensions,
    shared_index_name,
    vector_cast,
)
from application.ports.chunk_repository import EmbeddedChunk, SearchScope
from domain.chunks import SearchResult, TextChunk
from domain.search import Filter

EXACT_THRESHOLD = 50_000
"""A scope's knowledge bases without an index of their own are searched exactly up to this many
passages together: about 1 µs a passage, under the 100 ms p99 target with margin (BENCHMARKS.md,
"Search at scale")."""
EF_SEARCH_MIN = 100  # a top 10 over an own graph of 20,645 passages: recall@10 0.968
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
REINDEX_TEXT = "UPDATE chunks SET text = text WHERE org_id = $1 AND knowledge_base_id = $2"
PASSAGES = """
    SELECT chunk_index, text, page_number, start_char, end_char FROM chunks
    WHERE org_id = $1 AND file_record_id = $2 AND embedding_model = $3 ORDER BY chunk_index"""
DELETE_OTHER_MODELS = """
    DELETE FROM chunks WHERE org_id = $1 AND knowledge_base_id = $2 AND embedding_model <> $3"""
# Per knowledge base of the scope: its passages (row-level security applies), whether it has a
# valid HNSW index of its own for the dimension count, and the rows of the dimension count's
# shared HNSW index (the planner's estimate, -1 before the first ANALYZE).
SCOPE_SIZE = """
    SELECT s.knowledge_base_id, s.chunk_count,
           coalesce((SELECT i.indisvalid FROM pg_index i
                     WHERE i.indexrelid = to_regclass(
                         format('ix_chunks_kb_%s_%s', s.knowledge_base_id, $2::int))), false),
           (SELECT c.reltuples::float8 FROM pg_class c WHERE c.oid = to_regclass($3))
    FROM knowledge_base_stats s WHERE s.knowledge_base_id = ANY($1::bigint[])"""
ON_INDEX = "SELECT id, distance FROM ap_hnsw_nearest($1, $2, $3, $4, $5, $6, $7, $8)"


async def ensure_chunk_index(db: OrgConnection, dimensions: int) -> None:
    """Make sure the HNSW index for that dimension count exists (once per process)."""
    if dimensions not in _ensured_dimensions:
        await db.execute("SELECT ap_ensure_chunk_index($1)", dimensions)
        _ensured_dimensions.add(dimensions)


def nearest_statement(dimensions: int) -> str:
    """The vector query on the shared HNSW index for one dimension count (an integer, checked:
    part of the SQL): ordered by the index's own expression, `embedding::vector(N)`; (id,
    distance) rows."""
    dims = checked_dimensions(dimensions)
    cast = vector_cast(dims)
    return f"""
        SELECT id, distance FROM (
            SELECT c.id, c.embedding::{cast} <=> ($4::vector)::{cast} AS distance
            FROM chunks c
            WHERE c.dimensions = {dims} AND c.org_id = $1
              AND c.knowledge_base_id = ANY($2::bigint[]) AND c.embedding_model = $3
            ORDER BY c.embedding::{cast} <=> ($4::vector)::{cast}
            LIMIT $5
        ) nearest ORDER BY distance, id"""


def own_indexes_statement(
    knowledge_base_ids: Sequence[int], dimensions: int, *, with_exact: bool = False
) -> str:
    """One vector query over knowledge bases searched on their own HNSW indexes: a branch each,
    with its id and `vector_dims` as literals, which prove that index's predicate and not the
    shared index's (`dimensions = N`); with `with_exact`, one more branch searching the
    knowledge bases of `$2` exactly. (id, distance) rows, merged by distance."""
    dims = checked_dimensions(dimensions)
    cast = vector_cast(dims)
    branches = [
        f"""(SELECT c.id, c.embedding::{cast} <=> ($4::vector)::{cast} AS distance
             FROM chunks c
             WHERE c.knowledge_base_id = {int(kb)} AND vector_dims(c.embedding) = {dims}
               AND c.org_id = $1 AND c.embedding_model = $3
             ORDER BY c.embedding::{cast} <=> ($4::vector)::{cast}
             LIMIT $5)"""
        for kb in knowledge_base_ids
    ]
    if with_exact:
        branches.append(f"({exact_statement(dims)})")
    return f"""
        SELECT id, distance FROM ({" UNION ALL ".join(branches)}) nearest
        ORDER BY distance, id LIMIT $5"""


def dedicated_statement(knowledge_base_id: int, dimensions: int) -> str:
    """The vector query on one knowledge base's own HNSW index (`own_indexes_statement`)."""
    return own_indexes_statement([knowledge_base_id], dimensions)


def exact_statement(dimensions: int) -> str:
    """The exact vector query for one dimension count: the distance on the uncast column,
    which matches no index expression, so the plan reads the scope's rows (B-tree
    `ix_chunks_scope`) and sorts them; ties broken by id; (id, distance) rows."""
    dims = checked_dimensions(dimensions)
    return f"""
        SELECT c.id, (c.embedding <=> $4::vector)::float8 AS distance FROM chunks c
        WHERE c.dimensions = {dims} AND c.org_id = $1
          AND c.knowledge_base_id = ANY($2::bigint[]) AND c.embedding_model = $3
        ORDER BY c.embedding <=> $4::vector, c.id
        LIMIT $5"""


def ef_search_for(graph_rows: float, limit: int) -> int:
    """`hnsw.ef_search` for a top `limit` over an HNSW graph of `graph_rows` passages, for
    recall@10 of about 0.96: 100 x (rows / 25,000)^(1/3), at least 100 and 2 x limit. Measured
    (BENCHMARKS.md, "Search at scale"): an own graph of 20,645 passages gives 0.968 at 100; one
    of 74,265 gives 0.948 at 100 and 0.981 at 200 (144 here: 0.970); the shared graph of
    1,000,000 gives 0.958 at 300 and 0.974 at 400 (342 here: 0.964)."""
    growth: float = (max(float(graph_rows), 1.0) / 25_000) ** (1 / 3)
    base = math.ceil(EF_SEARCH_MIN * growth)
    return min(EF_SEARCH_MAX, max(EF_SEARCH_MIN, base, 2 * limit))


def hnsw_settings(scope_rows: int, index_rows: float, limit: int) -> tuple[int, int]:
    """`hnsw.ef_search` and `hnsw.max_scan_tuples` for a scope of `scope_rows` passages in an
    HNSW index of `index_rows`: the graph's own `ef_search_for` divided by the selectivity (a
    filtered scan should see as many of the scope's own passages), at most 1000. The iterative
    scan may visit 20 x limit / selectivity rows (at least pgvector's default 20,000, at most
    200,000) before it stops."""
    rows = max(float(index_rows), float(scope_rows), 1.0)
    selectivity = max(scope_rows, 1) / rows
    ef = min(EF_SEARCH_MAX, math.ceil(ef_search_for(rows, limit) / selectivity))
    scan = min(MAX_SCAN_TUPLES_MAX, max(MAX_SCAN_TUPLES_MIN, math.ceil(20 * limit / selectivity)))
    return ef, scan


class PgChunkRepository:
    """`ChunkRepository` in Postgres with pgvector."""

    exact_threshold: int = EXACT_THRESHOLD
    """Scopes of at most this many passages are searched exactly (tests lower it)."""
    tuning: SearchTuning = SearchTuning()
    """The fusion's weights and the feedback (the deployment's settings, set by the wiring)."""
    _sizes: dict[tuple[tuple[int, ...], int], list[Any]] | None

    async def search(
        self,
        org_id: str,
        *,
        query: str,
        scopes: Sequence[SearchScope],
        top_k: int,
        filters: Filter | None = None,
    ) -> list[SearchResult]:
        self._sizes = {}
        try:
            if filters is None:
                # Read now, while a query vector is still being computed, not after it.
                for scope in scopes:
                    await self._scope_sizes(scope)
            return await HybridSearch(self._db, self.nearest, self.tuning).search(
                org_id, query=query, scopes=scopes, top_k=top_k, filters=filters
            )
        finally:
            self._sizes = None

    def __init__(self, db: OrgConnection) -> None:
        self._db = db
        self._sizes = None

    async def _scope_sizes(self, scope: SearchScope) -> list[Any]:
        """`SCOPE_SIZE`'s rows for the scope (read once in a search)."""
        key = (tuple(scope.knowledge_base_ids), scope.dimensions)
        rows = None if self._sizes is None else self._sizes.get(key)
        if rows is None:
            dims = scope.dimensions
            rows = await self._db.fetch(
                SCOPE_SIZE, scope.knowledge_base_ids, dims, shared_index_name(dims)
            )
            if self._sizes is not None:
                self._sizes[key] = rows
        return rows

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

    async def reindex_text(self, org_id: str, knowledge_base_id: int) -> None:
        # The trigger `ap_chunk_text_search` rewrites `tsv` and `term_count` from the text.
        await self._db.execute(REINDEX_TEXT, org_id, knowledge_base_id)

    async def nearest(self, org_id: str, scope: SearchScope, limit: int) -> list[int]:
        """The ids of the scope's `limit` passages nearest to its query vector, in order: each
        knowledge base with an index of its own on it, the others exactly up to
        `exact_threshold` passages, else (or for a scope of at least half the shared index) on
        the shared index; the parts merged by distance. One statement after the sizes' read,
        two when knowledge bases with and without an own index need the shared one."""
        dims = scope.dimensions
        rows = await self._scope_sizes(scope)
        sizes = {int(r[0]): int(r[1]) for r in rows}
        own = [int(r[0]) for r in rows if r[2]]
        shared_rows = float(rows[0][3] or 0.0) if rows else 0.0
        total = sum(sizes.values())
        args = (org_id, scope.knowledge_base_ids, scope.embedding_model, scope.query_vector, limit)
        if total > self.exact_threshold and total >= SHARED_SHARE * shared_rows > 0:
            return _ids(await self._shared(dims, total, shared_rows, limit, args))
        rest = [kb for kb in scope.knowledge_base_ids if kb not in own]
        rest_rows = sum(sizes.get(kb, 0) for kb in rest)
        rest_args = (*args[:1], rest, *args[2:])
        if not own:
            if total <= self.exact_threshold:
                return _ids(await self._db.fetch(exact_statement(dims), *args))
            return _ids(await self._shared(dims, total, shared_rows, limit, args))
        # The own indexes, and the other knowledge bases if they are searched exactly, in one
        # statement; ef_search is the largest graph's.
        exact_rest = 0 < rest_rows <= self.exact_threshold
        found = await self._on_index(
            own_indexes_statement(own, dims, with_exact=exact_rest),
            max(ef_search_for(sizes[kb], limit) for kb in own),
            MAX_SCAN_TUPLES_MIN,
            rest_args,
        )
        if rest_rows > self.exact_threshold:
            found = [*found, *await self._shared(dims, rest_rows, shared_rows, limit, rest_args)]
            found.sort(key=lambda r: (r[1], r[0]))
        return _ids(found[:limit])

    async def _shared(
        self, dims: int, scope_rows: int, shared_rows: float, limit: int, args: tuple[Any, ...]
    ) -> list[Any]:
        ef, scan = hnsw_settings(scope_rows, shared_rows, limit)
        return await self._on_index(nearest_statement(dims), ef, scan, args)

    async def _on_index(self, sql: str, ef: int, scan: int, args: tuple[Any, ...]) -> list[Any]:
        return await self._db.fetch(ON_INDEX, ef, scan, sql, *args)


def _ids(rows: Sequence[Any]) -> list[int]:
    return [int(r[0]) for r in rows]
