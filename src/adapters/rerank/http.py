"""Reranking over HTTP: the `/rerank` endpoint that Cohere, Jina, vLLM, llama.cpp's server and
Hugging Face's Text Embeddings Inference (TEI) serve, in either of its two dialects.

Cohere's dialect (Cohere, Jina, vLLM, llama.cpp) takes `{"model", "query", "documents",
"top_n"}` and answers `{"results": [{"index", "relevance_score"}, ...]}`; TEI's takes
`{"query", "texts"}` and answers `[{"index", "score"}, ...]`. No one body suits every server:
Cohere's API refuses a field it does not know (422 "unknown field"), and TEI requires `texts`
(422 "missing field `texts`") while ignoring the fields it does not know. So Cohere's dialect
goes first, and a 400 or 422 that names `texts` has the batch sent again in TEI's, which the
reranker keeps once it has worked. Either answer is read whatever was sent (llama.cpp answers in
TEI's shape when it sees `texts`), and both list the passages best first, so the scores are put
back in the passages' order by `index`.

Passages go out in batches of at most `batch_size` (TEI refuses more than its
`--max-client-batch-size`, 32 by default), a few batches at a time. A batch refused as too large
(413, or a 400/422 naming the batch size) is split in half and each half sent again, and the
smaller size is kept for later calls. Nothing else is retried: a failed rerank costs the search
its reranking only (it keeps its fused order), and a retry would cost it time. The whole call
is bounded by `timeout`; every failure raises `RerankFailed` with a message that names neither
the key nor any passage.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from application.ports.reranker import RerankFailed

MAX_CONCURRENT_BATCHES = 4
TOO_LARGE_PHRASES = ("batch size", "too many documents", "too many texts", "too many inputs")
T = TypeVar("T")


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a reranker's address, or None: it must be a full http(s) URL (up to
    and including the endpoint's path, such as `/rerank` or `/v1/rerank`), without credentials
    in it (the key goes in the API key setting, so that it is never logged with the address)."""
    try:
        parts = urlsplit(url)
        if parts.port == 0:
            return "has no valid port"
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL):
        return "is not a valid URL"
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return "is not an http:// or https:// URL"
    if parts.username is not None or parts.password is not None:
        return "must not carry credentials (user:password@); give the key as AP_RERANK_API_KEY"
    return None


def public_address(url: str) -> str:
    """`url` without credentials, query or fragment: what logs may show of the address."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme.lower()}://{host}{parts.path}"


def parse_scores(body: object, count: int) -> list[float]:
    """The scores in a parsed `/rerank` answer for a batch of `count` passages, in the passages'
    order: Cohere's `{"results": [{"index", "relevance_score"}]}` or TEI's bare
    `[{"index", "score"}]`. Raises `RerankFailed` unless it holds exactly one finite score for
    every index from 0 to `count - 1`."""
    items = body.get("results") if isinstance(body, dict) else body
    if not isinstance(items, list):
        raise RerankFailed("The reranker's answer holds no list of results")
    if len(items) != count:
        raise RerankFailed(f"The reranker returned {len(items)} results for {count} passages")
    scores: list[float | None] = [None] * count
    for item in items:
        if not isinstance(item, dict):
            raise RerankFailed("The reranker's answer holds a result that is not an object")
        index = item.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise RerankFailed("The reranker returned an index out of range")
        if scores[index] is not None:
            raise RerankFailed("The reranker returned the same index twice")
        value = item["relevance_score"] if "relevance_score" in item else item.get("score")
        score = _finite(value)
        if score is None:
            raise RerankFailed("The reranker returned a score that is not a finite number")
        scores[index] = score
    # `count` results with distinct indexes in range fill every place.
    return [score for score in scores if score is not None]


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


class _TooLarge(Exception):
    """The server refused a batch as too large."""


class HttpReranker:
    """`Reranker` over one `/rerank` endpoint at `url` (given in full, e.g.
    `http://127.0.0.1:8080/rerank` or `https://api.cohere.com/v2/rerank`).

    `api_key`, when given, goes out as a bearer token; `model`, when given, as the body's
    `model` (Cohere and Jina require it, vLLM picks its served model without it, TEI and
    llama.cpp ignore it). `timeout` bounds a whole `rerank` in seconds, `batch_size` the
    passages in one request, `max_concurrency` the requests in flight for one call. The
    adapter owns its `httpx` client (redirects are not followed, so the key never goes
    elsewhere); `aclose` closes it.
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        model: str | None = None,
        timeout: float = 10.0,
        batch_size: int = 32,
        max_concurrency: int = MAX_CONCURRENT_BATCHES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        problem = url_problem(url)
        if problem is not None:
            raise ValueError(f"The reranker's URL {problem}")
        if not timeout > 0:
            raise ValueError("timeout must be positive")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self._url = url
        self._name = public_address(url)
        self._model = model or None
        self._timeout = timeout
        self._batch_size = batch_size
        self._max_concurrency = max_concurrency
        self._tei = False
        headers = {"Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.AsyncClient(
            headers=headers, timeout=timeout, follow_redirects=False, transport=transport
        )

    @property
    def name(self) -> str:
        """The endpoint's address without credentials, query or fragment."""
        return self._name

    @property
    def batch_size(self) -> int:
        """Passages per request now: the configured size, or less once the server refused it."""
        return self._batch_size

    async def warm_up(self) -> None:
        """Nothing to load: the model runs on the server. Here so that the service can warm
        every reranker alike."""

    async def aclose(self) -> None:
        """Close the HTTP client (its pooled connections)."""
        await self._client.aclose()

    async def rerank(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score per passage, in order; raises `RerankFailed` for any failure, or when the
        whole call takes longer than `timeout`."""
        texts = list(passages)
        if not isinstance(query, str) or not all(isinstance(text, str) for text in texts):
            raise TypeError("the query and the passages must be strings")
        if not texts:
            return []
        size = self._batch_size
        batches = [texts[start : start + size] for start in range(0, len(texts), size)]
        gate = asyncio.Semaphore(self._max_concurrency)
        try:
            async with asyncio.timeout(self._timeout):
                parts = await _all([self._score(query, batch, gate) for batch in batches])
        except TimeoutError:
            raise RerankFailed(f"The reranker did not answer within {self._timeout:g} s") from None
        return [score for part in parts for score in part]

    async def _score(self, query: str, batch: list[str], gate: asyncio.Semaphore) -> list[float]:
        try:
            return await self._score_once(query, batch, gate)
        except _TooLarge:
            if len(batch) == 1:
                raise RerankFailed("The reranker refused a single passage as too large") from None
        half = len(batch) // 2
        self._batch_size = min(self._batch_size, half)
        first, second = await _all(
            [self._score(query, batch[:half], gate), self._score(query, batch[half:], gate)]
        )
        return first + second

    async def _score_once(
        self, query: str, batch: list[str], gate: asyncio.Semaphore
    ) -> list[float]:
        async with gate:
            tei = self._tei
            response = await self._post(self._body(query, batch, tei=tei))
            if not tei and _asks_for_texts(response):
                retried = await self._post(self._body(query, batch, tei=True))
                # Only an answer in TEI's terms proves the server TEI: a Cohere-like server
                # whose refusal merely mentioned "texts" refuses the TEI body too.
                if retried.is_success or _too_large(retried):
                    self._tei = True
                    response = retried
        return _scores(response, len(batch))

    def _body(self, query: str, batch: list[str], *, tei: bool) -> dict[str, Any]:
        if tei:
            # TEI fails a passage longer than the model's window unless told to truncate it.
            return {"query": query, "texts": batch, "truncate": True}
        body: dict[str, Any] = {"query": query, "documents": batch, "top_n": len(batch)}
        if self._model is not None:
            body["model"] = self._model
        return body

    async def _post(self, body: dict[str, Any]) -> httpx.Response:
        try:
            return await self._client.post(self._url, json=body)
        except httpx.TimeoutException:
            raise RerankFailed("The reranker timed out") from None
        except httpx.ConnectError:
            raise RerankFailed("The reranker could not be reached (connection failed)") from None
        except httpx.TransportError as failure:
            raise RerankFailed(
                f"The reranker's connection failed ({type(failure).__name__})"
            ) from None


def _asks_for_texts(response: httpx.Response) -> bool:
    return (
        response.status_code in (400, 422) and "texts" in response.text and not _too_large(response)
    )


def _too_large(response: httpx.Response) -> bool:
    if response.status_code == 413:
        return True
    if response.status_code not in (400, 422):
        return False
    text = response.text.lower()
    return any(phrase in text for phrase in TOO_LARGE_PHRASES)


def _scores(response: httpx.Response, count: int) -> list[float]:
    if _too_large(response):
        raise _TooLarge
    if not response.is_success:
        raise RerankFailed(f"The reranker answered HTTP {response.status_code}")
    try:
        body = response.json()
    except ValueError:
        raise RerankFailed("The reranker's answer is not JSON") from None
    return parse_scores(body, count)


async def _all(coroutines: list[Coroutine[Any, Any, T]]) -> list[T]:
    """The coroutines' results, run side by side; the first failure cancels the others and is
    raised as itself (not in an exception group)."""
    if len(coroutines) == 1:
        return [await coroutines[0]]
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(coroutine) for coroutine in coroutines]
    except BaseExceptionGroup as failures:
        raise failures.exceptions[0] from None
    return [task.result() for task in tasks]
