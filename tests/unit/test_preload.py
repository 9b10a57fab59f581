"""`preload_search_models`: the default local embedding model is loaded and run once as serve
starts, a local reranker warmed, and a failure logged, never raised."""

from __future__ import annotations

from structlog.testing import capture_logs

from adapters.embeddings.local import LocalSentenceTransformerEmbedder
from application.ports.embedder import EmbeddingFailed
from application.use_cases.search_knowledge_base import Reranking
from entrypoints.config import Settings
from entrypoints.preload import preload_search_models


class Loaded(LocalSentenceTransformerEmbedder):
    """The local embedder's type, recording its calls instead of loading torch."""

    def __init__(self, failure: Exception | None = None) -> None:
        self.calls: list[str] = []
        self.failure = failure

    async def warm_up(self, *, queries: bool = False) -> None:
        if self.failure is not None:
            raise self.failure
        self.calls.append("warm_up for queries" if queries else "warm_up")

    async def embed(self, texts):
        self.calls.append("embed")
        return [[0.0] for _ in texts]


class Registry:
    def __init__(self, embedder) -> None:
        self.embedder = embedder
        self.asked: list[tuple[str, int]] = []

    def get(self, model: str, dimensions: int):
        self.asked.append((model, dimensions))
        return self.embedder


class Reranker:
    name = "folder"

    def __init__(self) -> None:
        self.warmed = 0

    async def warm_up(self) -> None:
        self.warmed += 1

    async def rerank(self, query, passages):
        return [0.0 for _ in passages]


class Container:
    def __init__(self, registry, reranking) -> None:
        self.registry = registry
        self.reranking = reranking

    async def get(self, kind):
        return self.reranking if kind is Reranking else self.registry


async def test_the_local_embedder_and_reranker_load_as_serve_starts(info_level):
    embedder, reranker = Loaded(), Reranker()
    registry = Registry(embedder)
    with capture_logs() as logs:
        await preload_search_models(Container(registry, Reranking(reranker)), Settings())
    assert registry.asked == [("local:all-MiniLM-L6-v2", 384)]
    assert embedder.calls == ["warm_up for queries", "embed"]  # loaded, exported, one pass
    assert reranker.warmed == 1
    assert [e["event"] for e in logs] == ["search_models_loaded"]


async def test_a_model_that_cannot_load_is_logged_not_raised(info_level):
    embedder = Loaded(EmbeddingFailed("The local embedding model is not installed"))
    with capture_logs() as logs:
        await preload_search_models(Container(Registry(embedder), Reranking()), Settings())
    assert [e["event"] for e in logs] == ["embedding_model_not_preloaded", "search_models_loaded"]
    assert logs[0]["error"] == "The local embedding model is not installed"
