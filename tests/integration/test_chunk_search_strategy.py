"""The vector search's plan choice (chunks.py): exact for small scopes, the HNSW index with
settings by selectivity above `exact_threshold`; passage counts kept with the passages."""

from __future__ import annotations

import numpy as np
import pytest

from adapters.postgres.chunks import (
    PgChunkRepository,
    ef_search_for,
    exact_statement,
    hnsw_settings,
    nearest_statement,
)
from adapters.postgres.database import org_connection
from adapters.postgres.files import PgFileRepository
from adapters.postgres.hybrid_search import SearchTuning
from adapters.postgres.knowledge_bases import PgKnowledgeBaseRepository
from application.ports.chunk_repository import EmbeddedChunk, SearchScope
from domain.chunks import TextChunk
from tests.integration.test_repositories import new_file, new_kb

pytestmark = pytest.mark.usefixtures("clean")
MODEL, OTHER, DIMS, INDEX = "local:m", "local:other", 384, "ix_chunks_embedding_384"


def passages(vectors: np.ndarray) -> list[EmbeddedChunk]:
    return [
        EmbeddedChunk(
            chunk=TextChunk(index=i, text=f"passage {i}", page_number=None, start_char=0,
                            end_char=9),
            vector=v.tolist(),
        )
        for i, v in enumerate(vectors)
    ]  # fmt: skip


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, DIMS)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


async def seeded(app_pool, org: str, n: int, rng: np.random.Generator) -> tuple[int, int]:
    """A knowledge base with one file of `n` random passages; (kb id, file record id)."""
    async with org_connection(app_pool, org) as db:
        kb = await PgKnowledgeBaseRepository(db).add(new_kb(org))
        file = await PgFileRepository(db).add(new_file(kb.id, org=org))
        await PgChunkRepository(db).replace_for_file(
            org, knowledge_base_id=kb.id, file_record_id=file.id, embedding_model=MODEL,
            dimensions=DIMS, chunks=passages(unit(rng, n)),
        )  # fmt: skip
        await db.commit()
    return kb.id, file.id


async def counts(db, kb_id: int) -> tuple[list[int], int | None]:
    files = await db.fetch(
        "SELECT chunk_count FROM knowledge_base_files WHERE knowledge_base_id = $1 ORDER BY id",
        kb_id,
    )
    total = await db.raw.fetchval(
        "SELECT chunk_count FROM knowledge_base_stats WHERE knowledge_base_id = $1", kb_id
    )
    return [r[0] for r in files], total


async def plan_under_hnsw_settings(db, statement: str, args: tuple) -> list[str]:
    """EXPLAIN of a vector statement planned as `ap_hnsw_nearest` plans it: under its settings,
    through plpgsql's EXECUTE ... USING."""
    async with db.raw.transaction():
        await db.raw.execute("SET LOCAL enable_sort = off; SET LOCAL hnsw.ef_search = 1000")
        await db.raw.execute(
            """CREATE FUNCTION pg_temp.explain_vector(
                   statement text, org text, kb_ids bigint[], model text, query vector,
                   lim integer) RETURNS SETOF text LANGUAGE plpgsql AS $$
               BEGIN
                   RETURN QUERY EXECUTE 'EXPLAIN ' || statement USING org, kb_ids, model, query,
                       lim;
               END $$"""
        )
        rows = await db.fetch("SELECT pg_temp.explain_vector($1, $2, $3, $4, $5, $6)",
                              statement, *args)  # fmt: skip
        await db.raw.execute("DROP FUNCTION pg_temp.explain_vector")
    return [r[0] for r in rows]


async def test_both_paths_return_the_exact_top_k_of_the_scope_only(app_pool):
    rng = np.random.default_rng(5)
    kb_a, _ = await seeded(app_pool, "org_a", 30, rng)
    await seeded(app_pool, "org_b", 30, rng)  # nearer passages, in another organization
    queries = unit(rng, 5)
    async with org_connection(app_pool, "org_a") as db:
        stored = await db.fetch("SELECT id, embedding FROM chunks ORDER BY id")
        ids = np.array([r[0] for r in stored])
        vectors = np.stack([r[1].to_numpy() for r in stored])
        repo = PgChunkRepository(db)
        # The vector ranking alone: no feedback round moving the query.
        repo.tuning = SearchTuning(feedback=False)
        for query in queries:
            exact = ids[np.lexsort((ids, 1.0 - vectors @ query))][:10].tolist()
            scope = SearchScope(knowledge_base_ids=[kb_a], embedding_model=MODEL,
                                dimensions=DIMS, query_vector=query.tolist())  # fmt: skip
            repo.exact_threshold = 10_000
            assert await repo.nearest("org_a", scope, 10) == exact
            repo.exact_threshold = 0
            assert await repo.nearest("org_a", scope, 10) == exact
            results = await repo.search("org_a", query="", scopes=[scope], top_k=10)
            assert [r.chunk_id for r in results] == exact
        # The HNSW path's statement, under the settings it runs with, is planned on the index;
        # the exact statement cannot be, even with sorting off.
        args = ("org_a", [kb_a], MODEL, queries[0].tolist(), 10)
        plan = await plan_under_hnsw_settings(db, nearest_statement(DIMS), args)
        assert any(INDEX in line for line in plan), plan
        assert not any("Sort  " in line and "Incremental" not in line for line in plan), plan
        plan = await plan_under_hnsw_settings(db, exact_statement(DIMS), args)
        assert not any(INDEX in line for line in plan), plan
        # The settings were the statement's own: gone after it.
        settings = await db.raw.fetchrow(
            "SELECT current_setting('enable_sort'), current_setting('hnsw.ef_search')"
        )
        assert tuple(settings) == ("on", "40")  # pgvector's default, untouched


async def test_hnsw_settings_are_restored_inside_a_callers_transaction(app_pool):
    rng = np.random.default_rng(6)
    kb_a, _ = await seeded(app_pool, "org_a", 20, rng)
    async with org_connection(app_pool, "org_a") as db:
        repo = PgChunkRepository(db)
        repo.exact_threshold = 0
        await db.begin()
        await db.raw.execute("SELECT set_config('hnsw.ef_search', '77', true)")
        scope = SearchScope(knowledge_base_ids=[kb_a], embedding_model=MODEL, dimensions=DIMS,
                            query_vector=unit(rng, 1)[0].tolist())  # fmt: skip
        assert len(await repo.nearest("org_a", scope, 10)) == 10
        settings = await db.raw.fetchrow(
            "SELECT current_setting('enable_sort'), current_setting('hnsw.ef_search'), "
            "current_setting('hnsw.max_scan_tuples')"
        )
        assert tuple(settings) == ("on", "77", "20000")
        await db.rollback()


def test_ef_search_grows_with_the_graph_and_as_the_scope_gets_more_selective():
    assert [ef_search_for(rows, 10) for rows in (1_000, 25_000, 74_000, 1_000_000)] == [
        100, 100, 144, 342,
    ]  # fmt: skip
    assert ef_search_for(25_000, 400) == 800
    assert ef_search_for(10**9, 10) == 1000
    assert hnsw_settings(1_000_000, 1_000_000, 10) == (342, 20_000)
    assert hnsw_settings(1_000_000, 1_000_000, 400) == (800, 20_000)
    assert hnsw_settings(800_000, 1_000_000, 10) == (428, 20_000)
    assert hnsw_settings(20_000, 5_000_000, 40) == (1000, 200_000)
    # An index whose row estimate is stale or missing (-1): the scope is all of it.
    assert hnsw_settings(50_000, -1, 10) == (126, 20_000)


async def test_passage_counts_follow_replacements_and_model_switches(app_pool):
    rng = np.random.default_rng(7)
    async with org_connection(app_pool, "org_a") as db:
        kb = await PgKnowledgeBaseRepository(db).add(new_kb("org_a"))
        files = PgFileRepository(db)
        one = await files.add(new_file(kb.id))
        two = await files.add(new_file(kb.id))
        repo = PgChunkRepository(db)

        async def replace(file_id: int, n: int, model: str = MODEL) -> None:
            await repo.replace_for_file(
                "org_a", knowledge_base_id=kb.id, file_record_id=file_id, embedding_model=model,
                dimensions=DIMS, chunks=passages(unit(rng, n)),
            )  # fmt: skip
            await db.commit()

        await replace(one.id, 5)
        assert await counts(db, kb.id) == ([5, 0], 5)
        await replace(one.id, 3)
        await replace(two.id, 4)
        assert await counts(db, kb.id) == ([3, 4], 7)
        # A pending model's passages do not count until the knowledge base switches to it.
        await replace(one.id, 6, OTHER)
        await replace(two.id, 2, OTHER)
        assert await counts(db, kb.id) == ([3, 4], 7)
        await db.execute("UPDATE knowledge_bases SET embedding_model = $1 WHERE id = $2",
                         OTHER, kb.id)  # fmt: skip
        await repo.delete_for_knowledge_base("org_a", kb.id, except_model=OTHER)
        await db.commit()
        assert await counts(db, kb.id) == ([6, 2], 8)
        await replace(two.id, 0, OTHER)
        assert await counts(db, kb.id) == ([6, 0], 6)
        # Nothing deleted (an abandoned re-embedding with no passages): counts unchanged.
        await repo.delete_for_knowledge_base("org_a", kb.id, except_model=OTHER)
        await db.commit()
        assert await counts(db, kb.id) == ([6, 0], 6)


async def test_another_organizations_knowledge_base_is_neither_counted_nor_searched(app_pool):
    rng = np.random.default_rng(8)
    kb_a, file_a = await seeded(app_pool, "org_a", 20, rng)
    async with org_connection(app_pool, "org_b") as db:
        repo = PgChunkRepository(db)
        scope = SearchScope(knowledge_base_ids=[kb_a], embedding_model=MODEL, dimensions=DIMS,
                            query_vector=unit(rng, 1)[0].tolist())  # fmt: skip
        for threshold in (10_000, 0):
            repo.exact_threshold = threshold
            for org in ("org_b", "org_a"):
                assert await repo.nearest(org, scope, 10) == []
                assert await repo.search(org, query="passage", scopes=[scope], top_k=5) == []
        assert await counts(db, kb_a) == ([], None)
        # Writing passages for another organization's file is refused by row-level security.
        with pytest.raises(Exception, match="row-level security"):
            await repo.replace_for_file(
                "org_a", knowledge_base_id=kb_a, file_record_id=file_a, embedding_model=MODEL,
                dimensions=DIMS, chunks=passages(unit(rng, 1)),
            )  # fmt: skip
        await db.rollback()
    async with org_connection(app_pool, "org_a") as db:
        assert await counts(db, kb_a) == ([20], 20)
