"""Embeddings from an OpenAI-compatible `POST {base_url}/embeddings` endpoint, over httpx.

Texts go out in batches. Timeouts, connection errors, 408, 429 and 5xx answers are retried with
exponential backoff and jitter (or after the provider's `Retry-After`), a bounded number of
times. A batch refused as too long is split in half and each half retried, down to single texts;
a single text still too long, any other 4xx and any malformed answer end in `EmbeddingFailed`.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from application.ports.embedder import EmbeddingFailed

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
TOO_LONG_PHRASES = (
    "maximum context length",
    "context length",
    "too long",
    "too many tokens",
    "maximum input length",
)
MAX_PROVIDER_MESSAGE = 300
_SECRET_LIKE = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-*]{6,}")
_jitter = random.SystemRandom()


class _Retryable(Exception):
    """A failure worth another attempt; `delay` is the provider's requested wait, if any."""

    def __init__(self, description: str, delay: float | None = None) -> None:
        super().__init__(description)
        self.description = description
        self.delay = delay


class _TooLong(Exception):
    """The provider refused the batch because its input is too long."""


@dataclass(frozen=True, slots=True)
class _ProviderError:
    code: str
    message: str


class OpenAICompatibleEmbedder:
    """`Embedder` for one model of an OpenAI-compatible embeddings API.

    `model` is the provider's own model name (without the `openai:` prefix). The `httpx` client
    is shared and owned by the caller; this class never closes it.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        model: str,
        dimensions: int,
        *,
        base_url: str = DEFAULT_OPENAI_BASE_URL,
        api_key: str | None = None,
        send_dimensions: bool = False,
        timeout: float = 60.0,
        batch_size: int = 64,
        max_attempts: int = 5,
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        max_retry_after: float = 60.0,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if dimensions < 1:
            raise ValueError("dimensions must be at least 1")
        self._client = client
        self._model = model
        self._dimensions = dimensions
        self._url = base_url.rstrip("/") + "/embeddings"
        self._api_key = api_key or None
        self._send_dimensions = send_dimensions
        self._timeout = timeout
        self._batch_size = batch_size
        self._max_attempts = max_attempts
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._max_retry_after = max_retry_after

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
        attempt = 1
        while True:
            try:
                return await self._request(texts)
            except _Retryable as failure:
                if attempt >= self._max_attempts:
                    raise EmbeddingFailed(
                        f"The embedding provider kept failing ({failure.description}); "
                        f"gave up after {self._max_attempts} attempts"
                    ) from None
                delay = self._delay(attempt, failure.delay)
            await asyncio.sleep(delay)
            attempt += 1

    def _delay(self, attempt: int, requested: float | None) -> float:
        if requested is not None:
            return min(max(requested, 0.0), self._max_retry_after)
        ceiling = min(self._backoff_max, self._backoff_base * 2 ** (attempt - 1))
        # Jitter spreads the retries of many workers hit by the same outage.
        return _jitter.uniform(ceiling / 2, ceiling)

    async def _request(self, texts: list[str]) -> list[list[float]]:
        payload: dict[str, Any] = {"model": self._model, "input": texts}
        if self._send_dimensions:
            payload["dimensions"] = self._dimensions
        headers = {"Accept": "application/json"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key}"
        try:
            response = await self._client.post(
                self._url, json=payload, headers=headers, timeout=self._timeout
            )
        except httpx.TimeoutException:
            raise _Retryable("timed out") from None
        except httpx.TransportError as exc:
            raise _Retryable(f"connection error: {type(exc).__name__}") from None
        status = response.status_code
        if status in RETRYABLE_STATUSES or status >= 500:
            raise _Retryable(f"HTTP {status}", retry_after(response.headers))
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

    def _provider_error(self, response: httpx.Response) -> _ProviderError:
        try:
            body = response.json()
        except ValueError:
            return _ProviderError("", self._scrub(response.text))
        error = body.get("error", body) if isinstance(body, dict) else body
        if isinstance(error, dict):
            code = error.get("code") or error.get("type") or ""
            message = error.get("message") or error.get("detail") or ""
            return _ProviderError(str(code), self._scrub(str(message)))
        return _ProviderError("", self._scrub(str(error)))

    def _scrub(self, message: str) -> str:
        """The provider's message without anything resembling a credential, kept short."""
        if self._api_key is not None:
            message = message.replace(self._api_key, "[redacted]")
        message = _SECRET_LIKE.sub("[redacted]", message)
        message = " ".join(message.split())
        if len(message) > MAX_PROVIDER_MESSAGE:
            message = message[: MAX_PROVIDER_MESSAGE - 3] + "..."
        return message

    def _refusal(self, status: int, error: _ProviderError) -> str:
        detail = f": {error.message}" if error.message else ""
        return f"The embedding provider refused the request (HTTP {status}){detail}"


def _is_too_long(error: _ProviderError) -> bool:
    if error.code == "context_length_exceeded":
        return True
    message = error.message.lower()
    return any(phrase in message for phrase in TOO_LONG_PHRASES)


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or an HTTP date)."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(float(milliseconds) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)
