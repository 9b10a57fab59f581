"""HNSW indexes of single knowledge bases, kept by the worker as the schema owner.

The shared HNSW index of a dimension count (`ix_chunks_embedding_<dims>`) holds every
organization's passages. Searched with a filter on one knowledge base, it finds that knowledge
base's nearest passages well only when the knowledge base is a large share of the index: the
graph walk meets mostly other rows, and raising `ef_search` buys recall back slowly and at a
cost (BENCHMARKS.md, "Search at scale"). An exact search is right at any size but costs about a
microsecond per passage. So a knowledge base of `min_passages` or more gets a graph of its own:

    ix_chunks_kb_<id>_<dims>  HNSW ((embedding::vector(dims)) vector_cosine_ops)
                              WHERE knowledge_base_id = <id> AND vector_dims(embedding) = <dims>

The predicate names the dimension count with `vector_dims(embedding)` rather than the
`dimensions` column that the shared index's predicate uses, so that a statement written for one
of the two can only be planned on that one (chunks.py writes both).

`keep_vector_indexes` makes the set of such indexes match the knowledge bases' sizes: it builds
the missing ones (largest first, `CREATE INDEX CONCURRENTLY`, so writes go on) and drops those of
knowledge bases deleted, re-embedded at another dimension count or shrunk below half the
threshold, and any left invalid by an interrupted build. A knowledge base that is at least
`SHARED_SHARE` of the shared index gets none: the shared graph is nearly its own (without a
shared index, every large one gets one). One sweep runs
at a time across workers (an advisory lock). DDL needs the table's owner, so the worker connects
with the migration URL; the search uses an index as soon as it is valid (chunks.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import asyncpg
import structlog

log = structlog.get_logger(__name__)

PREFIX = "ix_chunks_kb_"
SHARED_SHARE = 0.5
"""A scope holding at least this share of the shared index is searched on the shared index."""
LOCK_KEY = 0x61705F766563  # "ap_vec": one sweep at a time across workers
DEFAULT_MIN_PASSAGES = 10_000
"""An exact search of 10,000 passages takes about 12 ms on a 2-core machine, 14,000 already
about 18 ms, near the 20 ms target (BENCHMARKS.md)."""

OWNS_CHUNKS = """
    SELECT pg_has_role(current_user, c.relowner, 'USAGE')
    FROM pg_class c WHERE c.oid = 'public.chunks'::regclass"""
EXISTING = r"""
    SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE i.indrelid = 'public.chunks'::regclass AND c.relname LIKE 'ix\_chunks\_kb\_%'"""
# The knowledge bases large enough to keep an index (the stats policy lets the owner read every
# organization's rows).
CANDIDATES = """
    SELECT org_id, knowledge_base_id, chunk_count FROM knowledge_base_stats
    WHERE chunk_count >= $1 ORDER BY chunk_count DESC, knowledge_base_id"""
# A knowledge base's dimension count, read in its organization (its table forces row-level
# security on the owner too): the organization is set by the statement before.
SCOPED = "SELECT set_config('app.org_id', $1, false)"
DIMENSIONS = "SELECT embedding_dimensions FROM knowledge_bases WHERE id = $1"
SHARED_ROWS = "SELECT reltuples::float8 FROM pg_class WHERE oid = to_regclass($1)"


def vector_cast(dimensions: int) -> str:
    """The type the HNSW indexes are built on: `vector(N)`, `halfvec(N)` above 2,000."""
    dims = checked_dimensions(dimensions)
    return f"{'halfvec' if dims > 2000 else 'vector'}({dims})"


def checked_dimensions(dimensions: int) -> int:
    if not 1 <= int(dimensions) <= 4000:
        raise ValueError(f"unsupported dimension count: {dimensions}")
    return int(dimensions)


def dedicated_index_name(knowledge_base_id: int, dimensions: int) -> str:
    """The name of a knowledge base's own HNSW index for a dimension count."""
    return f"{PREFIX}{int(knowledge_base_id)}_{checked_dimensions(dimensions)}"


def shared_index_name(dimensions: int) -> str:
    """The dimension count's shared HNSW index (migration 0002's `ap_ensure_chunk_index`)."""
    return f"ix_chunks_embedding_{checked_dimensions(dimensions)}"


def create_statement(knowledge_base_id: int, dimensions: int) -> str:
    """`CREATE INDEX CONCURRENTLY` of a knowledge base's own index (integers, checked)."""
    kb, dims = int(knowledge_base_id), checked_dimensions(dimensions)
    cast = vector_cast(dims)
    ops = f"{cast.split('(')[0]}_cosine_ops"
    return (
        f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{dedicated_index_name(kb, dims)}" '
        f"ON chunks USING hnsw ((embedding::{cast}) {ops}) "
        f"WHERE knowledge_base_id = {kb} AND vector_dims(embedding) = {dims}"
    )


@dataclass(slots=True)
class Sweep:
    """What one `keep_vector_indexes` call did (or that another worker held the lock)."""

    built: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: bool = False

    @property
    def changes(self) -> int:
        return len(self.built) + len(self.dropped)


async def keep_vector_indexes(
    connection: asyncpg.Connection, *, min_passages: int, build_memory: str = "1GB"
) -> Sweep:
    """Build the missing knowledge-base indexes and drop the unwanted ones, as the owner of
    `chunks`, on a connection outside any transaction. `min_passages` <= 0 drops them all."""
    sweep = Sweep()
    if not await connection.fetchval("SELECT pg_try_advisory_lock($1)", LOCK_KEY):
        sweep.skipped = True
        return sweep
    try:
        wanted, kept = await _plan(connection, min_passages)
        existing = {row[0]: row[1] for row in await connection.fetch(EXISTING)}
        for name, valid in existing.items():
            if not valid or name not in kept:
                await connection.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')
                sweep.dropped.append(name)
        await connection.execute(
            "SELECT set_config('maintenance_work_mem', $1, false)", build_memory
        )
        for name, (kb, dims) in wanted.items():
            if existing.get(name):
                continue
            try:
                await connection.execute(create_statement(kb, dims))
            except asyncpg.PostgresError as error:
                # An index left invalid by the failure is dropped by the next sweep.
                log.warning("vector_index.build_failed", index=name, error=str(error))
                sweep.failed.append(name)
            else:
                sweep.built.append(name)
                log.info("vector_index.built", index=name, knowledge_base_id=kb)
    finally:
        await connection.execute("SELECT pg_advisory_unlock($1)", LOCK_KEY)
    return sweep


async def _plan(
    connection: asyncpg.Connection, min_passages: int
) -> tuple[dict[str, tuple[int, int]], set[str]]:
    """(indexes to have: name -> (knowledge base, dimensions), names to keep if present)."""
    wanted: dict[str, tuple[int, int]] = {}
    kept: set[str] = set()
    if min_passages <= 0:
        return wanted, kept
    shared: dict[int, float] = {}
    try:
        for org_id, kb, count in await connection.fetch(CANDIDATES, max(1, min_passages // 2)):
            await connection.execute(SCOPED, org_id)
            dims = await connection.fetchval(DIMENSIONS, kb)
            if dims is None:
                continue
            name = dedicated_index_name(kb, dims)
            kept.add(name)
            if dims not in shared:
                shared[dims] = await connection.fetchval(SHARED_ROWS, shared_index_name(dims)) or 0
            most_of_shared = shared[dims] > 0 and count >= SHARED_SHARE * shared[dims]
            if count >= min_passages and not most_of_shared:
                wanted[name] = (kb, dims)
    finally:
        await connection.execute(SCOPED, "")
    return wanted, kept | set(wanted)


async def owns_chunks(connection: asyncpg.Connection) -> bool:
    """Whether this connection's role may create and drop indexes on `chunks`."""
    return bool(await connection.fetchval(OWNS_CHUNKS))
