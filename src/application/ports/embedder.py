from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class EmbeddingFailed(Exception):
    """Embedding failed for good (after retries); `message` is shown to the file's owner."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Embedder(Protocol):
    """Turns texts into vectors of a fixed dimension count with one model.

    Batches internally; retries transient failures (timeouts, rate limits, server errors)
    with backoff; when the provider refuses a batch as too long it splits the batch in half
    and retries the halves. Raises `EmbeddingFailed` when a text cannot be embedded at all.
    Never blocks the event loop.
    """

    @property
    def dimensions(self) -> int:
        """How many numbers each vector has."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...


class EmbedderRegistry(Protocol):
    """Finds the embedder for a knowledge base's `provider:model` and dimension count."""

    def get(self, model: str, dimensions: int) -> Embedder:
        """The embedder; raises `EmbeddingFailed` when the provider or model is unavailable."""
        ...
