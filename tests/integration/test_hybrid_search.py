"""The full-text half on PostgreSQL (BM25 over stemmed lexemes, exactly as its formula says),
feedback, highlights and filters, under row-level security."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from adapters.postgres.chunks import PgChunkRepository
from adapters.postgres.database import org_connection
from adapters.postgres.files import PgFileRepository
from adapters.postgres.hybrid_search import SearchTuning
from adapters.postgres.knowledge_bases import PgKnowledgeBaseRepository
from adapters.postgres.text_search import Bm25, TextRanking, TextScope
from application.ports.chunk_repository import EmbeddedChunk, SearchScope
from domain.chunks import TextChunk
from domain.search import parse_filters
from tests.integration.test_repositories import new_file, new_kb

pytestmark = pytest.mark.usefixtures("clean")
MODEL, DIMS = "local:m", 384

TEXTS = {
    "flows.md": [
        "The boundary layer flows over a flat plate at supersonic speeds.",
        "Heat transfer in the laminar boundary layer of a cone.",
    ],
    "wings.md": [
        "Wing flutter at transonic speeds, measured in a wind tunnel.",
        "A slender wing in supersonic flow: pressure and lift.",
        "Nothing about this: bread, cheese and wine.",
    ],
}
METADATA = {"flows.md": {"team": "aero", "year": 2020}, "wings.md": {"team": "structures"}}


def vector(seed: int) -> list[float]:
    x = np.random.default_rng(seed).standard_normal(DIMS)
    return (x / np.linalg.norm(x)).tolist()


async def seed(app_pool, org: str = "org_a") -> tuple[int, dict[str, int]]:
    async with org_connection(app_pool, org) as db:
        kb = await PgKnowledgeBaseRepository(db).add(new_kb(org))
        records = {}
        for n, (name, texts) in enumerate(TEXTS.items()):
            new = dataclasses.replace(
                new_file(kb.id, org=org, size=100 * (n + 1)),
                file_name=name,
                user_metadata=METADATA[name],
            )
            file = await PgFileRepository(db).add(new)
            records[name] = file.id
            chunks = [
                EmbeddedChunk(
                    chunk=TextChunk(index=i, text=t, page_number=None, start_char=0,
                                    end_char=len(t)),
                    vector=vector(100 * n + i),
                )
                for i, t in enumerate(texts)
            ]  # fmt: skip
            await PgChunkRepository(db).replace_for_file(
                org, knowledge_base_id=kb.id, file_record_id=file.id, embedding_model=MODEL,
                dimensions=DIMS, chunks=chunks,
            )  # fmt: skip
        await db.commit()
    return kb.id, records


def scope(kb_id: int, seed_: int = 7) -> SearchScope:
    return SearchScope(
        knowledge_base_ids=[kb_id], embedding_model=MODEL, dimensions=DIMS,
        query_vector=vector(seed_),
    )  # fmt: skip


async def test_bm25_scores_are_the_formula_over_stemmed_lexemes(app_pool):
    kb_id, _ = await seed(app_pool)
    query = "What is known about supersonic flows over wings?"
    async with org_connection(app_pool, "org_a") as db:
        rows = await db.fetch("SELECT id, tsv::text, term_count, text FROM chunks ORDER BY id")
        lexemes = {
            r[0]: Counter(
                {part.split(":")[0].strip("'"): len(part.split(":")[1].split(","))
                 for part in r[1].split(" ")}
            )
            for r in rows
        }  # fmt: skip
        lengths = {r[0]: r[2] for r in rows}
        terms = [r[0] for r in await db.fetch(
            "SELECT lexeme FROM unnest(to_tsvector('english', $1))", query)]  # fmt: skip
        bm25 = Bm25(k1=1.2, b=0.75)
        ranking = TextRanking(db, "org_a", TextScope("english", [kb_id], [MODEL], None), bm25)
        found = await ranking.rank(query, 10)
    # Stop words ("what", "is", "about", "over") are gone, "flows" and "wings" are stemmed.
    assert sorted(terms) == ["flow", "known", "superson", "wing"]
    assert all(length == sum(lexemes[i].values()) for i, length in lengths.items())
    n, average = len(rows), sum(lengths.values()) / len(rows)
    k1, b = 1.2, 0.75
    expected = {}
    for chunk_id, counts in lexemes.items():
        score = 0.0
        for term in terms:
            df = sum(1 for c in lexemes.values() if term in c)
            tf = counts.get(term, 0)
            if tf:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[chunk_id] / average))
        if score:
            expected[chunk_id] = score
    assert found == sorted(expected, key=lambda i: (-expected[i], i))
    assert dict(ranking.scores) == pytest.approx(expected)
    texts = {r[0]: r[3] for r in rows}
    assert not any("bread" in texts[i] for i in found)


async def test_a_question_finds_passages_by_any_stemmed_term_with_highlights(app_pool):
    kb_id, _ = await seed(app_pool)
    async with org_connection(app_pool, "org_a") as db:
        repo = PgChunkRepository(db)
        repo.tuning = SearchTuning(vector_weight=0.0)
        results = await repo.search(
            "org_a", query="Which wings flutter?", scopes=[scope(kb_id)], top_k=3
        )
    assert results[0].text.startswith("Wing flutter")
    first = results[0]
    marked = [first.text[h.start : h.end] for h in first.highlights]
    assert marked == ["Wing", "flutter"]


async def test_each_files_best_passage_comes_before_any_files_second(app_pool):
    kb_id, _ = await seed(app_pool)
    query = "wing flutter supersonic flow"
    async with org_connection(app_pool, "org_a") as db:
        repo = PgChunkRepository(db)
        # The words alone decide: the seeded vectors are random.
        repo.tuning = SearchTuning(vector_weight=0.0, feedback=False, diversify=False)
        plain = await repo.search("org_a", query=query, scopes=[scope(kb_id)], top_k=5)
        repo.tuning = SearchTuning(vector_weight=0.0, feedback=False)
        diverse = await repo.search("org_a", query=query, scopes=[scope(kb_id)], top_k=5)
    assert sorted(r.chunk_id for r in plain) == sorted(r.chunk_id for r in diverse)
    assert [r.file_name for r in plain[:2]] == ["wings.md", "wings.md"]
    assert [r.file_name for r in diverse[:2]] == ["wings.md", "flows.md"]
    firsts = {r.file_name: r.chunk_id for r in reversed(plain)}
    assert [r.chunk_id for r in diverse[:2]] == [firsts["wings.md"], firsts["flows.md"]]


async def test_feedback_and_vectors_keep_every_result_from_the_scope(app_pool):
    kb_id, _ = await seed(app_pool)
    await seed(app_pool, "org_b")
    async with org_connection(app_pool, "org_a") as db:
        repo = PgChunkRepository(db)
        results = await repo.search(
            "org_a", query="supersonic boundary layer", scopes=[scope(kb_id)], top_k=10
        )
        ids = {r[0] for r in await db.fetch("SELECT id FROM chunks")}
    assert len(results) == 5
    assert {r.chunk_id for r in results} <= ids
    assert results[0].text.startswith("The boundary layer flows")


@pytest.mark.parametrize(
    ("filters", "names"),
    [
        ({"key": "team", "op": "eq", "value": "aero"}, {"flows.md"}),
        ({"key": "userMetadata.team", "op": "ne", "value": "aero"}, {"wings.md"}),
        ({"key": "year", "op": "gte", "value": 2020}, {"flows.md"}),
        ({"key": "year", "op": "lt", "value": 2020}, set()),
        ({"key": "year", "op": "ne", "value": 2020}, {"wings.md"}),  # a missing key passes ne
        ({"key": "team", "op": "in", "value": ["structures", "other"]}, {"wings.md"}),
        ({"key": "team", "op": "nin", "value": ["structures"]}, {"flows.md"}),
        ({"key": "year", "op": "eq", "value": "2020"}, set()),  # a string is not a number
        ({"key": "fileName", "op": "eq", "value": "wings.md"}, {"wings.md"}),
        ({"key": "fileSize", "op": "gt", "value": 150}, {"wings.md"}),
        ({"key": "contentType", "op": "in", "value": ["text/markdown"]}, {"flows.md", "wings.md"}),
        (
            {
                "or": [
                    {"key": "team", "op": "eq", "value": "aero"},
                    {
                        "and": [
                            {"key": "fileSize", "op": "lte", "value": 200},
                            {"key": "team", "op": "eq", "value": "structures"},
                        ]
                    },
                ]
            },
            {"flows.md", "wings.md"},
        ),
    ],
)
async def test_filters_limit_the_search_to_the_matching_files(app_pool, filters, names):
    kb_id, _ = await seed(app_pool)
    async with org_connection(app_pool, "org_a") as db:
        results = await PgChunkRepository(db).search(
            "org_a", query="wing flow", scopes=[scope(kb_id)], top_k=10,
            filters=parse_filters(filters),
        )  # fmt: skip
    assert {r.file_name for r in results} == names


async def test_created_at_filters_compare_times(app_pool):
    kb_id, _ = await seed(app_pool)
    now = datetime.now(UTC)
    later = (now + timedelta(days=1)).isoformat()
    earlier = (now - timedelta(days=1)).isoformat()
    async with org_connection(app_pool, "org_a") as db:
        repo = PgChunkRepository(db)
        for op, value, count in (("lt", later, 5), ("gt", later, 0), ("gte", earlier, 5)):
            filters = parse_filters({"key": "createdAt", "op": op, "value": value})
            results = await repo.search(
                "org_a", query="wing", scopes=[scope(kb_id)], top_k=10, filters=filters
            )
            assert len(results) == count, (op, value)


async def test_the_language_decides_the_stemming(app_pool):
    kb_id, _ = await seed(app_pool)
    async with org_connection(app_pool, "org_a") as db:
        english = TextRanking(db, "org_a", TextScope("english", [kb_id], [MODEL], None), Bm25())
        assert len(await english.rank("flow", 10)) == 2  # "flows" and "flow"
        await db.execute("UPDATE knowledge_bases SET language = 'simple' WHERE id = $1", kb_id)
        await PgChunkRepository(db).reindex_text("org_a", kb_id)
        simple = TextRanking(db, "org_a", TextScope("simple", [kb_id], [MODEL], None), Bm25())
        assert len(await simple.rank("flow", 10)) == 1  # only "flow" itself
        # Stop words count in simple: "the" is a term there.
        assert len(await simple.rank("the", 10)) == 2
        await db.rollback()
