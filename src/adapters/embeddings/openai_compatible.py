"""Embeddings from an OpenAI-compatible `POST {base_url}/embeddings` endpoint, reached through
the shared `OpenAIGateway`.

Texts go out in batches. Timeouts, connection errors, 408, 409, 429 and 5xx answers are retried
with the gateway's backoff (`adapters.openai_gateway.retry`: exponential with jitter, or after the
provider's `Retry-After`), a bounded number of times. A batch refused as too long is split in
half and each half retried, down to single texts; a single text still too long, any other 4xx
and any malformed answer end in `EmbeddingFailed`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import httpx

from adapters.openai_gateway.gateway import OpenAIGateway, ProviderError
from adapters.openai_gateway.retry import (
    EMBEDDING_RETRY,
    GaveUp,
    Retryable,
    RetryPolicy,
    is_retryable_status,
    is_retryable_transport,
    retry_after,
)
from application.ports.embedder import EmbeddingFailed

TOO_LONG_PHRASES = (
    "maximum context length",
    "context length",
    "too long",
    "too many tokens",
    "maximum input length",
)


class _TooLong(Exception):
    """The provider refused the batch because its input is too long."""


class OpenAICompatibleEmbedder:
    """`Embedder` for one model of the OpenAI-compatible embeddings API behind `gateway`.

    `model` is the provider's own model name (without the `openai:` prefix). `timeout` bounds
    each request; `retry` says how often and how patiently a failed batch is sent again.
    """

    def __init__(
        self,
        gateway: OpenAIGateway,
        model: str,
        dimensions: int,
        *,
        send_dimensions: bool = False,
        timeout: float = 60.0,
        batch_size: int = 64,
        retry: RetryPolicy = EMBEDDING_RETRY,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if dimensions < 1:
            raise ValueError("dimensions must be at least 1")
        self._gateway = gateway
        self._model = model
        self._dimensions = dimensions
        self._url = gateway.url("embeddings")
        self._headers = gateway.headers("application/json")
        self._send_dimensions = send_dimensions
        self._timeout = timeout
        self._batch_size = batch_size
        self._retry = retry

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def model(self) -> str:
        """The provider's model name."""
        return self._model

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"texts must be strings, got {type(text).__name__}")
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            batch = list(texts[start : start + self._batch_size])
            vectors.extend(await self._embed_splitting(batch))
        return vectors

    async def _embed_splitting(self, texts: list[str]) -> list[list[float]]:
        try:
            return await self._embed_with_retries(texts)
        except _TooLong:
            if len(texts) == 1:
                raise EmbeddingFailed(
                    f"A text of {len(texts[0])} characters is too long for embedding model "
                    f"{self._model}"
                ) from None
        half = len(texts) // 2
        return await self._embed_splitting(texts[:half]) + await self._embed_splitting(texts[half:])

    async def _embed_with_retries(self, texts: list[str]) -> list[list[float]]:
        try:
            return await self._retry.run(lambda: self._request(texts))
        except GaveUp as failure:
            raise EmbeddingFailed(
                f"The embedding provider kept failing ({failure.message}); "
                f"gave up after {failure.attempts} attempts"
            ) from None

    async def _request(self, texts: list[str]) -> list[list[float]]:
        payload: dict[str, Any] = {"model": self._model, "input": texts}
        if self._send_dimensions:
            payload["dimensions"] = self._dimensions
        try:
            response = await self._gateway.client.post(
                self._url, json=payload, headers=self._headers, timeout=self._timeout
            )
        except httpx.TransportError as failure:
            description = (
                "timed out"
                if isinstance(failure, httpx.TimeoutException)
                else f"connection error: {type(failure).__name__}"
            )
            if is_retryable_transport(failure):
                raise Retryable(description) from None
            raise EmbeddingFailed(f"The embedding provider failed ({description})") from None
        status = response.status_code
        if is_retryable_status(status):
            raise Retryable(f"HTTP {status}", retry_after(response.headers))
        if status in (400, 413):
            error = self._provider_error(response)
            if status == 413 or _is_too_long(error):
                raise _TooLong
            raise EmbeddingFailed(self._refusal(status, error))
        if status >= 400:
            raise EmbeddingFailed(self._refusal(status, self._provider_error(response)))
        if status != 200:
            raise EmbeddingFailed(f"The embedding provider answered with HTTP {status}")
        return self._vectors(response, len(texts))

    def _vectors(self, response: httpx.Response, count: int) -> list[list[float]]:
        try:
            body = response.json()
        except ValueError:
            raise EmbeddingFailed("The embedding provider's answer is not JSON") from None
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or len(data) != count:
            got = len(data) if isinstance(data, list) else "no"
            raise EmbeddingFailed(
                f"The embedding provider returned {got} embeddings for {count} texts"
            )
        vectors: list[list[float] | None] = [None] * count
        for position, item in enumerate(data):
            if not isinstance(item, dict):
                raise EmbeddingFailed("The embedding provider's answer is malformed")
            index = item.get("index", position)
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
                raise EmbeddingFailed("The embedding provider returned an invalid index")
            if vectors[index] is not None:
                raise EmbeddingFailed("The embedding provider returned an index twice")
            vectors[index] = self._vector(item.get("embedding"))
        return [vector for vector in vectors if vector is not None]

    def _vector(self, value: object) -> list[float]:
        if not isinstance(value, list):
            raise EmbeddingFailed("The embedding provider returned an embedding that is no list")
        if len(value) != self._dimensions:
            raise EmbeddingFailed(
                f"The embedding provider returned {len(value)}-dimensional embeddings for "
                f"{self._model}, expected {self._dimensions}"
            )
        vector: list[float] = []
        for number in value:
            if isinstance(number, bool) or not isinstance(number, int | float):
                raise EmbeddingFailed("The embedding provider returned a non-numeric embedding")
            if not math.isfinite(number):
                raise EmbeddingFailed("The embedding provider returned a non-finite embedding")
            vector.append(float(number))
        return vector

    def _provider_error(self, response: httpx.Response) -> ProviderError:
        return self._gateway.provider_error(response.text)

    def _refusal(self, status: int, error: ProviderError) -> str:
        detail = f": {error.message}" if error.message else ""
        return f"The embedding provider refused the request (HTTP {status}){detail}"


def _is_too_long(error: ProviderError) -> bool:
    if error.code == "context_length_exceeded":
        return True
    message = error.message.lower()
    return any(phrase in message for phrase in TOO_LONG_PHRASES)
