"""`SearchKnowledgeBase` with a reranker: which passages it orders, what a failure leaves, and
the filters and `rerank` flag it takes."""

from __future__ import annotations

import asyncio

import pytest

from application.ports.reranker import RerankFailed
from application.use_cases.search_knowledge_base import (
    RERANK_UNAVAILABLE,
    Reranking,
    SearchKnowledgeBase,
    SearchKnowledgeBaseQuery,
)
from domain.chunks import SearchResult
from domain.errors import Invalid
from domain.search import Condition
from tests.fakes import FakeChunks, FakeEmbedderRegistry
from tests.fakes.chat import fake_meter
from tests.unit.test_knowledge_base_use_cases import create


def result(n: int) -> SearchResult:
    return SearchResult(
        file_id="f", file_name=f"{n}.md", knowledge_base_id=1, chunk_id=n, text=f"passage {n}",
        score=1.0 / (60 + n), page_number=None,
    )  # fmt: skip


class ScriptedReranker:
    """Scores each passage by the number in its text (or fails); records what it was given."""

    name = "scripted"

    def __init__(self, failure: RerankFailed | None = None) -> None:
        self.failure = failure
        self.calls: list[tuple[str, list[str]]] = []

    async def rerank(self, query, passages):
        self.calls.append((query, list(passages)))
        if self.failure is not None:
            raise self.failure
        return [float(text.split()[1]) for text in passages]


async def searcher(world, caller, reranker=None, candidates=30):
    kb = await create(world, caller)
    chunks = FakeChunks()
    chunks.found = [result(n) for n in range(1, 41)]
    search = SearchKnowledgeBase(
        world.kbs, chunks, FakeEmbedderRegistry(), fake_meter(), Reranking(reranker, candidates)
    )
    return kb, chunks, search


async def test_the_reranker_orders_the_best_candidates(world, caller):
    reranker = ScriptedReranker()
    kb, chunks, search = await searcher(world, caller, reranker, candidates=30)
    answer = await search.execute(
        SearchKnowledgeBaseQuery.parse(caller=caller, kb_ids=[kb], query=" lift ", top_k=5)
    )
    assert answer.rerank == "applied"
    assert chunks.searches[0]["top_k"] == 30  # the candidates, not only the top 5
    assert reranker.calls == [("lift", [f"passage {n}" for n in range(1, 31)])]
    assert [r.chunk_id for r in answer.results] == [30, 29, 28, 27, 26]
    assert [r.score for r in answer.results] == [30.0, 29.0, 28.0, 27.0, 26.0]


async def test_a_failing_reranker_leaves_the_fused_order_and_says_why(world, caller):
    reranker = ScriptedReranker(RerankFailed("The reranker timed out"))
    kb, _, search = await searcher(world, caller, reranker)
    answer = await search.execute(
        SearchKnowledgeBaseQuery.parse(caller=caller, kb_ids=[kb], query="lift", top_k=3)
    )
    assert (answer.rerank, answer.rerank_error) == ("failed", "The reranker timed out")
    assert [r.chunk_id for r in answer.results] == [1, 2, 3]


async def test_rerank_false_skips_it_and_true_needs_a_reranker(world, caller):
    reranker = ScriptedReranker()
    kb, chunks, search = await searcher(world, caller, reranker)
    answer = await search.execute(
        SearchKnowledgeBaseQuery.parse(
            caller=caller, kb_ids=[kb], query="lift", top_k=3, rerank=False
        )
    )
    assert answer.rerank == "off" and not reranker.calls
    assert chunks.searches[0]["top_k"] == 3
    _, _, plain = await searcher(world, caller)
    with pytest.raises(Invalid, match=RERANK_UNAVAILABLE):
        await plain.execute(
            SearchKnowledgeBaseQuery.parse(caller=caller, kb_ids=[kb], query="x", rerank=True)
        )
    answer = await plain.execute(
        SearchKnowledgeBaseQuery.parse(caller=caller, kb_ids=[kb], query="x", top_k=2)
    )
    assert answer.rerank == "off" and len(answer.results) == 2


@pytest.mark.parametrize("rerank", ["yes", 1, []])
async def test_rerank_must_be_a_boolean(world, caller, rerank):
    with pytest.raises(Invalid, match="rerank must be a boolean"):
        SearchKnowledgeBaseQuery.parse(caller=caller, kb_ids=[1], query="x", rerank=rerank)


async def test_filters_are_parsed_and_reach_the_passages(world, caller):
    kb, chunks, search = await searcher(world, caller)
    await search.execute(
        SearchKnowledgeBaseQuery.parse(
            caller=caller, kb_ids=[kb], query="x",
            filters={"key": "team", "op": "eq", "value": "aero"},
        )
    )  # fmt: skip
    assert chunks.searches[0]["filters"] == Condition("team", "eq", "aero", None)


async def test_the_query_is_embedded_while_the_search_runs_and_its_failure_is_the_searchs(
    world, caller
):
    kb = await create(world, caller)
    events: list[str] = []

    class Embedder:
        dimensions = 384

        def __init__(self, failure: Exception | None = None) -> None:
            self.failure = failure

        async def embed(self, texts):
            events.append("embedding")
            await asyncio.sleep(0.01)
            if self.failure is not None:
                raise self.failure
            events.append("embedded")
            return [[1.0] + [0.0] * 383 for _ in texts]

    class Registry:
        def __init__(self, embedder: Embedder) -> None:
            self.embedder = embedder

        def get(self, model, dimensions):
            return self.embedder

    class Chunks(FakeChunks):
        async def search(self, org_id, *, query, scopes, top_k, filters=None):
            events.append("words ranked")
            [scope] = [await s.resolved() for s in scopes]
            events.append(f"vector of {len(scope.query_vector)}")
            return []

    query = SearchKnowledgeBaseQuery.parse(caller=caller, kb_ids=[kb], query="wings")
    search = SearchKnowledgeBase(world.kbs, Chunks(), Registry(Embedder()), fake_meter())
    await search.execute(query)
    assert events == ["embedding", "words ranked", "embedded", "vector of 384"]

    # A failed embedding fails the search, whether or not the repository waited for it.
    refused = SearchKnowledgeBase(
        world.kbs, FakeChunks(), Registry(Embedder(RuntimeError("cap"))), fake_meter()
    )
    with pytest.raises(RuntimeError, match="cap"):
        await refused.execute(query)
