"""Picks and keeps the embedder for a knowledge base's `provider:model` and dimension count."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from adapters.embeddings.local import (
    MINILM_DIMENSIONS,
    LocalSentenceTransformerEmbedder,
    bundled_minilm_path,
)
from adapters.embeddings.openai_compatible import DEFAULT_OPENAI_BASE_URL, OpenAICompatibleEmbedder
from application.ports.embedder import Embedder, EmbeddingFailed
from domain.models import KNOWN_EMBEDDING_DIMENSIONS, MAX_EMBEDDING_DIMENSIONS

# Local models we ship: name -> (dimension count, where its folder is).
LOCAL_MODELS: dict[str, tuple[int, Callable[[], Path]]] = {
    "all-MiniLM-L6-v2": (MINILM_DIMENSIONS, bundled_minilm_path),
}


class DefaultEmbedderRegistry:
    """`EmbedderRegistry` over the bundled local models and one OpenAI-compatible endpoint.

    Embedders are created on first request and kept: one per local model (so its weights load
    once) and one per OpenAI model and dimension count. The `httpx` client is shared, owned by
    the caller.
    """

    def __init__(
        self,
        *,
        http_client: httpx.AsyncClient,
        openai_base_url: str = DEFAULT_OPENAI_BASE_URL,
        openai_api_key: str | None = None,
        openai_timeout: float = 60.0,
        openai_batch_size: int = 64,
        openai_max_attempts: int = 5,
        openai_send_dimensions: bool = False,
        local_batch_size: int = 32,
        torch_threads: int = 2,
    ) -> None:
        self._http_client = http_client
        self._openai_base_url = openai_base_url
        self._openai_api_key = openai_api_key or None
        self._openai_timeout = openai_timeout
        self._openai_batch_size = openai_batch_size
        self._openai_max_attempts = openai_max_attempts
        self._openai_send_dimensions = openai_send_dimensions
        self._local_batch_size = local_batch_size
        self._torch_threads = torch_threads
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
        for package in ("torch", "sentence_transformers"):
            if importlib.util.find_spec(package) is None:
                raise EmbeddingFailed(
                    f"Local embeddings are unavailable: the {package} package is not installed"
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
        )
        self._embedders[key] = embedder
        return embedder

    def _openai(self, name: str, dimensions: int) -> Embedder:
        key = (f"openai:{name}", dimensions)
        cached = self._embedders.get(key)
        if cached is not None:
            return cached
        openai_itself = urlsplit(self._openai_base_url).hostname == "api.openai.com"
        if self._openai_api_key is None and openai_itself:
            raise EmbeddingFailed("No API key is configured for OpenAI embeddings")
        embedder = OpenAICompatibleEmbedder(
            self._http_client,
            name,
            dimensions,
            base_url=self._openai_base_url,
            api_key=self._openai_api_key,
            send_dimensions=self._openai_send_dimensions,
            timeout=self._openai_timeout,
            batch_size=self._openai_batch_size,
            max_attempts=self._openai_max_attempts,
        )
        self._embedders[key] = embedder
        return embedder
