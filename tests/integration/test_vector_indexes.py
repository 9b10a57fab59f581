"""HNSW indexes of single knowledge bases (vector_indexes.py): built, used and dropped."""

from __future__ import annotations

import dataclasses
import itertools

import asyncpg
import numpy as np
import pytest

from adapters.postgres.chunks import PgChunkRepository, dedicated_statement, nearest_statement
from adapters.postgres.database import asyncpg_dsn, org_connection
from adapters.postgres.vector_indexes import (
    LOCK_KEY,
    create_statement,
    dedicated_index_name,
    keep_vector_indexes,
    owns_chunks,
)
from application.ports.chunk_repository import SearchScope
from entrypoints.config import Settings
from entrypoints.worker.jobs import vector_indexer
from tests.integration.test_chunk_search_strategy import (
    DIMS,
    INDEX,
    MODEL,
    plan_under_hnsw_settings,
    seeded,
    unit,
)

pytestmark = pytest.mark.usefixtures("clean")
EXISTING = r"""
    SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE i.indrelid = 'chunks'::regclass AND c.relname LIKE 'ix\_chunks\_kb\_%'
    ORDER BY 1"""


@pytest.fixture
async def owner(database):
    """The tables' owner outside any transaction, as the worker's sweep connects; the
    knowledge bases' own indexes are dropped before and after (TRUNCATE keeps them, and
    knowledge base ids restart)."""
    connection = await asyncpg.connect(asyncpg_dsn(database.url))
    await keep_vector_indexes(connection, min_passages=0)
    yield connection
    await keep_vector_indexes(connection, min_passages=0)
    await connection.close()


async def indexes(owner) -> dict[str, bool]:
    return {row[0]: row[1] for row in await owner.fetch(EXISTING)}


def exact_top(vectors: np.ndarray, ids: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    return ids[np.lexsort((ids, 1.0 - vectors @ query))][:k].tolist()


async def test_large_knowledge_bases_get_an_index_that_their_searches_use(app_pool, owner):
    rng = np.random.default_rng(11)
    big, _ = await seeded(app_pool, "org_a", 120, rng)
    small, _ = await seeded(app_pool, "org_a", 40, rng)
    other, _ = await seeded(app_pool, "org_b", 150, rng)
    third, _ = await seeded(app_pool, "org_b", 100, rng)
    await owner.execute("ANALYZE chunks")
    assert await owns_chunks(owner)

    sweep = await keep_vector_indexes(owner, min_passages=100)
    assert sorted(sweep.built) == sorted(
        dedicated_index_name(kb, DIMS) for kb in (big, other, third)
    )
    assert await indexes(owner) == {name: True for name in sweep.built}
    again = await keep_vector_indexes(owner, min_passages=100)
    assert (again.built, again.dropped) == ([], [])

    async with org_connection(app_pool, "org_a") as db:
        stored = await db.fetch("SELECT id, embedding FROM chunks ORDER BY id")
        ids = np.array([r[0] for r in stored])
        vectors = np.stack([r[1].to_numpy() for r in stored])
        repo = PgChunkRepository(db)
        for query, threshold, kbs in itertools.product(
            unit(rng, 3), (50_000, 10), ([big], [big, small])
        ):
            # The small knowledge base exactly, then (above the threshold) on the shared index.
            repo.exact_threshold = threshold
            scope = SearchScope(knowledge_base_ids=kbs, embedding_model=MODEL,
                                dimensions=DIMS, query_vector=query.tolist())  # fmt: skip
            # Graphs this small at ef_search 100 find the exact answers.
            for limit in (10, 3):
                assert await repo.nearest("org_a", scope, limit) == exact_top(
                    vectors[np.isin(ids, await kb_rows(db, kbs))],
                    ids[np.isin(ids, await kb_rows(db, kbs))],
                    query,
                    limit,
                )
        args = ("org_a", [big], MODEL, unit(rng, 1)[0].tolist(), 10)
        plan = await plan_under_hnsw_settings(db, dedicated_statement(big, DIMS), args)
        assert any(dedicated_index_name(big, DIMS) in line for line in plan), plan
        # The shared index's statement is never planned on a knowledge base's own index.
        plan = await plan_under_hnsw_settings(db, nearest_statement(DIMS), args)
        assert any(INDEX in line for line in plan), plan
        assert not any("ix_chunks_kb_" in line for line in plan), plan


async def kb_rows(db, kbs: list[int]) -> list[int]:
    rows = await db.fetch("SELECT id FROM chunks WHERE knowledge_base_id = ANY($1)", kbs)
    return [r[0] for r in rows]


async def test_indexes_of_deleted_shrunk_or_broken_knowledge_bases_are_dropped(app_pool, owner):
    rng = np.random.default_rng(12)
    gone, _ = await seeded(app_pool, "org_a", 60, rng)
    shrinking, file = await seeded(app_pool, "org_a", 60, rng)
    kept, _ = await seeded(app_pool, "org_b", 60, rng)
    await owner.execute("ANALYZE chunks")
    assert len((await keep_vector_indexes(owner, min_passages=50)).built) == 3

    async with org_connection(app_pool, "org_a") as db:
        await db.execute("DELETE FROM knowledge_bases WHERE id = $1", gone)
        await db.execute("DELETE FROM chunks WHERE file_record_id = $1 AND chunk_index >= 24", file)
        await db.execute("UPDATE knowledge_base_files SET chunk_count = 24 WHERE id = $1", file)
        await db.commit()
    # A build cut short leaves an invalid index behind.
    await owner.execute(f'DROP INDEX "{dedicated_index_name(kept, DIMS)}"')
    broken = dedicated_index_name(kept, DIMS)
    with pytest.raises(asyncpg.PostgresError):
        # A unique index over duplicates fails its concurrent build and stays, invalid.
        await owner.execute(
            f'CREATE UNIQUE INDEX CONCURRENTLY "{broken}" ON chunks (dimensions) '
            f"WHERE knowledge_base_id = {kept}"
        )
    assert (await indexes(owner))[broken] is False

    # Below half the threshold (24 < 25): dropped with the deleted one's and the broken one.
    sweep = await keep_vector_indexes(owner, min_passages=50)
    assert sorted(sweep.dropped) == sorted(
        [dedicated_index_name(gone, DIMS), dedicated_index_name(shrinking, DIMS), broken]
    )
    assert sweep.built == [broken]
    assert await indexes(owner) == {broken: True}


async def test_a_knowledge_base_that_is_most_of_the_shared_index_uses_that(app_pool, owner):
    rng = np.random.default_rng(13)
    await seeded(app_pool, "org_a", 80, rng)
    await seeded(app_pool, "org_a", 20, rng)
    await seeded(app_pool, "org_b", 30, rng)
    await owner.execute("ANALYZE chunks")
    assert (await keep_vector_indexes(owner, min_passages=50)).built == []


async def test_one_sweep_at_a_time(app_pool, owner, database):
    rng = np.random.default_rng(14)
    await seeded(app_pool, "org_a", 60, rng)
    await seeded(app_pool, "org_b", 60, rng)
    await seeded(app_pool, "org_c", 60, rng)
    await owner.execute("ANALYZE chunks")
    other = await asyncpg.connect(asyncpg_dsn(database.url))
    try:
        await other.execute("SELECT pg_advisory_lock($1)", LOCK_KEY)
        sweep = await keep_vector_indexes(owner, min_passages=50)
        assert sweep.skipped and sweep.built == []
    finally:
        await other.close()
    assert len((await keep_vector_indexes(owner, min_passages=50)).built) == 3


def test_index_statements_take_checked_integers_only():
    assert create_statement(7, 3072).endswith(
        "USING hnsw ((embedding::halfvec(3072)) halfvec_cosine_ops) "
        "WHERE knowledge_base_id = 7 AND vector_dims(embedding) = 3072"
    )
    with pytest.raises(ValueError):
        create_statement(7, 5000)
    with pytest.raises(ValueError):
        dedicated_index_name("7; DROP TABLE chunks", 384)  # type: ignore[arg-type]


async def test_the_workers_sweep_builds_as_the_owner_and_only_warns_otherwise(
    app_pool, owner, database
):
    rng = np.random.default_rng(15)
    kb, _ = await seeded(app_pool, "org_a", 60, rng)
    await seeded(app_pool, "org_b", 90, rng)
    await owner.execute("ANALYZE chunks")
    settings = dataclasses.replace(Settings(), vector_index_min_passages=50)
    assert await vector_indexer(settings, database)() == 1
    assert await indexes(owner) == {dedicated_index_name(kb, DIMS): True}

    await owner.execute("DROP ROLE IF EXISTS ap_not_owner")
    await owner.execute("CREATE ROLE ap_not_owner LOGIN")
    try:
        stranger = dataclasses.replace(
            database, url=database.url.replace("postgres@", "ap_not_owner@"), migration_url=None
        )
        sweep = vector_indexer(dataclasses.replace(settings, vector_index_min_passages=0), stranger)
        assert await sweep() == 0
        assert await sweep() == 0
        assert await indexes(owner) == {dedicated_index_name(kb, DIMS): True}
    finally:
        await owner.execute("DROP ROLE ap_not_owner")


async def test_a_build_that_fails_is_reported_and_tried_again_by_the_next_sweep(
    app_pool, owner, database
):
    rng = np.random.default_rng(16)
    kb, _ = await seeded(app_pool, "org_a", 60, rng)
    await seeded(app_pool, "org_b", 90, rng)
    await owner.execute("ANALYZE chunks")
    name = dedicated_index_name(kb, DIMS)
    # Another session holds a lock the concurrent build must wait for; the sweep gives up.
    blocker = await asyncpg.connect(asyncpg_dsn(database.url))
    try:
        async with blocker.transaction():
            await blocker.execute("LOCK TABLE chunks IN SHARE UPDATE EXCLUSIVE MODE")
            await owner.execute("SET lock_timeout = '200ms'")
            sweep = await keep_vector_indexes(owner, min_passages=50)
    finally:
        await owner.execute("RESET lock_timeout")
        await blocker.close()
    assert (sweep.built, sweep.failed) == ([], [name])
    assert name not in {k for k, valid in (await indexes(owner)).items() if valid}
    again = await keep_vector_indexes(owner, min_passages=50)
    assert again.built == [name]
    assert await indexes(owner) == {name: True}
