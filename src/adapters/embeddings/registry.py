"""Picks and keeps the embedder for a knowledge base's `provider:model` and dimension count."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from adapters.embeddings.local import (
    MINILM_DIMENSIONS,
    LocalSentenceTransformerEmbedder,
    bundled_minilm_path,
)
from adapters.embeddings.openai_compatible import OpenAICompatibleEmbedder
from adapters.openai_gateway.gateway import OpenAIGateway
from adapters.openai_gateway.retry import EMBEDDING_RETRY, RetryPolicy
from adapters.optional import LOCAL_EMBEDDING_PACKAGES, LOCAL_EXTRA, missing
from application.ports.embedder import Embedder, EmbeddingFailed
from domain.models import KNOWN_EMBEDDING_DIMENSIONS, MAX_EMBEDDING_DIMENSIONS

# Local models we ship: name -> (dimension count, where its folder is).
LOCAL_MODELS: dict[str, tuple[int, Callable[[], Path]]] = {
    "all-MiniLM-L6-v2": (MINILM_DIMENSIONS, bundled_minilm_path),
}


class DefaultEmbedderRegistry:
    """`EmbedderRegistry` over the bundled local models (with the `local` extra installed) and
    the OpenAI-compatible endpoint behind `gateway`.

    Embedders are created on first request and kept: one per local model (so its weights load
    once) and one per OpenAI model and dimension count. The local packages are looked for only
    when a local model is asked for (torch is imported when it first encodes), so OpenAI models
    work in an installation without them.
    """

    def __init__(
        self,
        *,
        gateway: OpenAIGateway,
        openai_timeout: float = 60.0,
        openai_batch_size: int = 64,
        openai_retry: RetryPolicy = EMBEDDING_RETRY,
        openai_send_dimensions: bool = False,
        local_batch_size: int = 32,
        torch_threads: int = 2,
        local_runtime: str = "onnx",
    ) -> None:
        self._gateway = gateway
        self._openai_timeout = openai_timeout
        self._openai_batch_size = openai_batch_size
        self._openai_retry = openai_retry
        self._openai_send_dimensions = openai_send_dimensions
        self._local_batch_size = local_batch_size
        self._torch_threads = torch_threads
        self._local_runtime = local_runtime
        self._embedders: dict[tuple[str, int], Embedder] = {}
        self._lock = threading.Lock()

    def get(self, model: str, dimensions: int) -> Embedder:
        provider, _, name = model.strip().partition(":")
        if not name:
            raise EmbeddingFailed(f"'{model}' is not a provider:model embedding model reference")
        known = KNOWN_EMBEDDING_DIMENSIONS.get(f"{provider}:{name}")
        if known is not None and dimensions != known:
            raise EmbeddingFailed(
                f"{provider}:{name} produces {known}-dimensional embeddings, not {dimensions}"
            )
        if not 1 <= dimensions <= MAX_EMBEDDING_DIMENSIONS:
            raise EmbeddingFailed(
                f"Embedding dimensions must be between 1 and {MAX_EMBEDDING_DIMENSIONS}"
            )
        with self._lock:
            if provider == "local":
                return self._local(name, dimensions)
            if provider == "openai":
                return self._openai(name, dimensions)
        raise EmbeddingFailed(f"Unknown embedding provider '{provider}'")

    def _local(self, name: str, dimensions: int) -> Embedder:
        key = (f"local:{name}", dimensions)
        cached = self._embedders.get(key)
        if cached is not None:
            return cached
        entry = LOCAL_MODELS.get(name)
        if entry is None:
            available = ", ".join(f"local:{known}" for known in sorted(LOCAL_MODELS))
            raise EmbeddingFailed(f"Unknown local embedding model '{name}'; available: {available}")
        for package in missing(LOCAL_EMBEDDING_PACKAGES)[:1]:
            raise EmbeddingFailed(
                f"Local embeddings are unavailable: the {package} package is not "
                f"installed (install {LOCAL_EXTRA})"
            )
        model_dimensions, locate = entry
        if dimensions != model_dimensions:
            raise EmbeddingFailed(
                f"local:{name} produces {model_dimensions}-dimensional embeddings, not {dimensions}"
            )
        embedder = LocalSentenceTransformerEmbedder(
            locate(),
            dimensions=model_dimensions,
            batch_size=self._local_batch_size,
            torch_threads=self._torch_threads,
            runtime=self._local_runtime,
        )
        self._embedders[key] = embedder
        return embedder

    def _openai(self, name: str, dimensions: int) -> Embedder:
        key = (f"openai:{name}", dimensions)
        cached = self._embedders.get(key)
        if cached is not None:
            return cached
        if self._gateway.api_key is None and self._gateway.is_openai:
            raise EmbeddingFailed("No API key is configured for OpenAI embeddings")
        embedder = OpenAICompatibleEmbedder(
            self._gateway,
            name,
            dimensions,
            send_dimensions=self._openai_send_dimensions,
            timeout=self._openai_timeout,
            batch_size=self._openai_batch_size,
            retry=self._openai_retry,
        )
        self._embedders[key] = embedder
        return embedder
