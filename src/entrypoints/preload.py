"""Loading the search's local models as `serve` starts, so that no search or upload pays for it:
the default embedding model when it is a local one, and a local cross-encoder reranker."""

from __future__ import annotations

import asyncio
import time

import structlog
from dishka import AsyncContainer

from adapters.embeddings.local import LocalSentenceTransformerEmbedder
from application.ports.embedder import EmbedderRegistry, EmbeddingFailed
from application.use_cases.search_knowledge_base import Reranking
from domain.models import KNOWN_EMBEDDING_DIMENSIONS
from entrypoints.config import Settings

log = structlog.get_logger("agent_platform.preload")


async def preload_search_models(container: AsyncContainer, settings: Settings) -> None:
    """Load the models, logging (never raising) what could not load: a search then reports
    it as before. Logs `search_models_loaded` once done."""
    started = time.monotonic()
    model = settings.default_embedding_model
    dimensions = KNOWN_EMBEDDING_DIMENSIONS.get(model)
    if dimensions is not None:
        try:
            embedder = (await container.get(EmbedderRegistry)).get(model, dimensions)
            if isinstance(embedder, LocalSentenceTransformerEmbedder):
                await embedder.warm_up(queries=True)
                # torch's first forward pass sets up its kernels: a few hundred ms, paid here.
                await embedder.embed(["warm up"])
        except (EmbeddingFailed, OSError, RuntimeError) as exc:
            log.warning("embedding_model_not_preloaded", model=model, error=str(exc))
    reranker = (await container.get(Reranking)).reranker
    warm_up = getattr(reranker, "warm_up", None)
    if warm_up is not None:
        try:
            await warm_up()
        except Exception as exc:
            log.warning("reranker_not_preloaded", error=str(exc))
    log.info("search_models_loaded", seconds=round(time.monotonic() - started, 2))


def start_preloading(container: AsyncContainer, settings: Settings) -> asyncio.Task[None]:
    """`preload_search_models` in the background: the service answers meanwhile, and a
    search that comes first waits for the model on the encoder's own queue."""
    return asyncio.get_running_loop().create_task(
        preload_search_models(container, settings), name="preload-search-models"
    )
