"""The HTTP reranker against a real HTTP server on loopback (uvicorn) that plays each server's
`/rerank`: Cohere (which refuses fields it does not know), TEI (which requires `texts`, ignores
other fields and refuses more than 32 texts), llama.cpp (either body, answering in the dialect
it was asked in), and broken ones: slow, failing, not JSON, the wrong number of results, NaN,
a repeated or out-of-range index, a redirect."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn

from adapters.rerank import make_reranker
from adapters.rerank.http import HttpReranker
from application.ports.reranker import RerankFailed
from tests.conftest import free_port

API_KEY = "rk-test-secret-0123456789abcdef"
SECRET_PASSAGE = "the launch code is 0000-PASSAGE-SECRET"
TEI_MAX_BATCH = 32
COHERE_FIELDS = {"model", "query", "documents", "top_n", "max_tokens_per_doc", "return_documents"}


def relevance(query: str, passage: str) -> float:
    """A deterministic score: the share of the query's words found in the passage, with a
    small tie-breaker from the passage's length."""
    words = set(query.lower().split())
    found = sum(1 for word in set(passage.lower().split()) if word in words)
    return found / (len(words) or 1) + 1 / (10 + len(passage))


@dataclass
class Seen:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class RerankServer:
    """An ASGI app answering `/rerank` as several real servers do, by path prefix."""

    requests: list[Seen] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0
    too_large_past: int = 8

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = scope["path"]
        self.requests.append(Seen(path, headers, body))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            status, payload, extra = await self.answer(path, headers, body)
        finally:
            self.in_flight -= 1
        content = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        kind = b"application/json" if not isinstance(payload, bytes) else b"text/plain"
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", kind), *extra],
            }
        )
        await send({"type": "http.response.body", "body": content})

    async def answer(
        self, path: str, headers: dict[str, str], body: Any
    ) -> tuple[int, Any, list[tuple[bytes, bytes]]]:
        kind = path.strip("/").split("/")[0]
        if kind in ("cohere", "tei", "llama") and headers.get("authorization") != (
            f"Bearer {API_KEY}"
        ):
            return 401, {"message": "invalid api token"}, []
        if kind == "cohere":
            return (*cohere(body), [])
        if kind == "tei":
            return (*tei(body), [])
        if kind == "llama":
            return (*llama(body), [])
        if kind == "tight":
            documents = body["documents"]
            if len(documents) > self.too_large_past:
                return 413, b"Payload Too Large", []
            return 200, results(body["query"], documents), []
        if kind == "concurrent":
            await asyncio.sleep(0.05)
            return 200, results(body["query"], body["documents"]), []
        if kind == "slow":
            await asyncio.sleep(3)
            return 200, results(body["query"], body["documents"]), []
        if kind == "fails":
            return 500, {"error": f"boom while reading {body['documents'][0]}"}, []
        if kind == "nonjson":
            return 200, b"<html>hello</html>", []
        if kind == "short":
            return 200, {"results": results(body["query"], body["documents"])["results"][1:]}, []
        if kind == "nan":
            return 200, b'{"results": [{"index": 0, "relevance_score": NaN}]}', []
        if kind == "repeat":
            items = [{"index": 0, "relevance_score": 0.5} for _ in body["documents"]]
            return 200, {"results": items}, []
        if kind == "range":
            items = [
                {"index": i + 1, "relevance_score": 0.5} for i in range(len(body["documents"]))
            ]
            return 200, {"results": items}, []
        if kind == "stringly":
            quoted = [{"index": i, "relevance_score": "0.5"} for i in range(len(body["documents"]))]
            return 200, {"results": quoted}, []
        if kind == "redirect":
            return 307, b"", [(b"location", b"http://127.0.0.1:9/elsewhere")]
        if kind == "mentions":
            return 422, {"message": "query must not be empty (texts are fine)"}, []
        return 404, {"message": "no such route"}, []


def ranked(query: str, passages: list[str]) -> list[tuple[int, float]]:
    """The passages' (index, score), best first, as every real server answers."""
    scored = [(i, relevance(query, passage)) for i, passage in enumerate(passages)]
    return sorted(scored, key=lambda item: -item[1])


def results(query: str, documents: list[str]) -> dict[str, Any]:
    return {
        "results": [{"index": i, "relevance_score": score} for i, score in ranked(query, documents)]
    }


def cohere(body: Any) -> tuple[int, Any]:
    """Cohere's v2 rerank: unknown fields and a missing model are refused."""
    unknown = sorted(set(body) - COHERE_FIELDS)
    if unknown:
        return 422, {"message": f"unknown field: parameter '{unknown[0]}' is not a valid field"}
    if "model" not in body:
        return 400, {"message": "invalid request: model must be specified"}
    documents = body["documents"]
    answer = results(body["query"], documents)
    answer["results"] = answer["results"][: body.get("top_n", len(documents))]
    return 200, {"id": "x", **answer, "meta": {"billed_units": {"search_units": 1}}}


def tei(body: Any) -> tuple[int, Any]:
    """TEI's router: serde ignores unknown fields, axum refuses a missing one in plain text."""
    if "texts" not in body:
        return 422, (
            b"Failed to deserialize the JSON body into the target type: missing field `texts` "
            b"at line 1 column 80"
        )
    texts = body["texts"]
    if not texts:
        return 400, {"error": "`texts` cannot be empty", "error_type": "Empty"}
    if len(texts) > TEI_MAX_BATCH:
        message = f"batch size {len(texts)} > maximum allowed batch size {TEI_MAX_BATCH}"
        return 422, {"error": message, "error_type": "Validation"}
    return 200, [{"index": i, "score": score} for i, score in ranked(body["query"], texts)]


def llama(body: Any) -> tuple[int, Any]:
    """llama.cpp's server: `documents` or `texts`; TEI's answer when it was sent `texts`."""
    tei_format = "texts" in body
    documents = body.get("documents", body.get("texts", []))
    order = ranked(body["query"], documents)[: body.get("top_n", len(documents))]
    if tei_format:
        return 200, [{"index": i, "score": score} for i, score in order]
    items = [{"index": i, "relevance_score": score} for i, score in order]
    return 200, {"model": "x", "object": "list", "usage": {}, "results": items}


@dataclass
class Served:
    """The running server and its base URL."""

    app: RerankServer
    base: str

    def url(self, kind: str) -> str:
        return f"{self.base}/{kind}/rerank"

    def seen(self, kind: str) -> list[Seen]:
        return [seen for seen in self.app.requests if seen.path.startswith(f"/{kind}/")]


@pytest.fixture(scope="module")
async def served() -> AsyncIterator[Served]:
    app = RerankServer()
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        lifespan="off",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn offers no event to wait on)
        await asyncio.sleep(0.01)
    try:
        yield Served(app, f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def reranker(url: str, **options: Any) -> AsyncIterator[HttpReranker]:
    options.setdefault("api_key", API_KEY)
    options.setdefault("timeout", 5.0)
    client = HttpReranker(url, **options)
    try:
        yield client
    finally:
        await client.aclose()


QUERY = "capital of france"
PASSAGES = [
    "Berlin is the capital of Germany.",
    "Paris is the capital of France.",
    "Bananas are yellow.",
    "France borders Spain.",
]


def expected(query: str, passages: list[str]) -> list[float]:
    return [relevance(query, passage) for passage in passages]


def assert_clean(failure: RerankFailed) -> None:
    """A failure's message names neither the key nor a passage."""
    assert API_KEY not in failure.message
    assert "PASSAGE-SECRET" not in failure.message
    for passage in PASSAGES:
        assert passage not in failure.message


async def test_cohere_style_scores_come_back_in_the_passages_order(served: Served) -> None:
    async with reranker(served.url("cohere"), model="rerank-v3.5") as client:
        scores = await client.rerank(QUERY, PASSAGES)
    assert scores == pytest.approx(expected(QUERY, PASSAGES))
    assert max(range(len(scores)), key=scores.__getitem__) == 1
    (seen,) = served.seen("cohere")
    assert seen.headers["authorization"] == f"Bearer {API_KEY}"
    assert seen.body == {
        "model": "rerank-v3.5",
        "query": QUERY,
        "documents": PASSAGES,
        "top_n": len(PASSAGES),
    }


async def test_tei_is_recognised_by_its_refusal_and_then_spoken_to_directly(
    served: Served,
) -> None:
    async with reranker(served.url("tei")) as client:
        first = await client.rerank(QUERY, PASSAGES)
        requests_for_first = len(served.seen("tei"))
        second = await client.rerank("yellow bananas", PASSAGES)
    assert first == pytest.approx(expected(QUERY, PASSAGES))
    assert second == pytest.approx(expected("yellow bananas", PASSAGES))
    # Cohere's body first (refused: no `texts`), then TEI's; afterwards TEI's only.
    assert requests_for_first == 2
    sent = served.seen("tei")
    assert "texts" not in sent[0].body
    assert sent[1].body == {"query": QUERY, "texts": PASSAGES, "truncate": True}
    assert len(sent) == 3
    assert sent[2].body["texts"] == PASSAGES
    assert all(seen.headers["authorization"] == f"Bearer {API_KEY}" for seen in sent)


async def test_llama_cpp_style_answers_in_jina_shape_to_documents(served: Served) -> None:
    async with reranker(served.url("llama")) as client:
        scores = await client.rerank(QUERY, PASSAGES)
    assert scores == pytest.approx(expected(QUERY, PASSAGES))
    (seen,) = served.seen("llama")
    assert "model" not in seen.body
    assert seen.body["documents"] == PASSAGES


async def test_more_passages_than_teis_batch_limit_go_in_batches_and_merge_in_order(
    served: Served,
) -> None:
    passages = [f"passage {i} about {'france' if i % 7 == 0 else 'nothing'}" for i in range(70)]
    async with reranker(served.url("tei"), batch_size=TEI_MAX_BATCH) as client:
        await client.rerank(QUERY, PASSAGES[:1])
        before = len(served.seen("tei"))
        scores = await client.rerank(QUERY, passages)
    assert scores == pytest.approx(expected(QUERY, passages))
    sizes = sorted(len(seen.body["texts"]) for seen in served.seen("tei")[before:])
    assert sizes == [6, 32, 32]


async def test_a_batch_past_teis_limit_is_split_and_the_smaller_size_kept(served: Served) -> None:
    passages = [f"france fact number {i}" for i in range(100)]
    async with reranker(served.url("tei"), batch_size=100) as client:
        scores = await client.rerank(QUERY, passages)
        assert client.batch_size <= TEI_MAX_BATCH
        before = len(served.seen("tei"))
        again = await client.rerank(QUERY, passages)
    assert scores == pytest.approx(expected(QUERY, passages))
    assert again == scores
    later = served.seen("tei")[before:]
    assert all(len(seen.body["texts"]) <= TEI_MAX_BATCH for seen in later)
    assert len(later) == math.ceil(100 / 25)


async def test_a_413_past_the_servers_limit_halves_the_batches(served: Served) -> None:
    passages = [f"text {i} on france" for i in range(20)]
    async with reranker(served.url("tight"), batch_size=20) as client:
        scores = await client.rerank(QUERY, passages)
        assert client.batch_size == 5
    assert scores == pytest.approx(expected(QUERY, passages))


async def test_batches_go_a_few_at_a_time(served: Served) -> None:
    served.app.most_in_flight = 0
    passages = [f"concurrent passage {i}" for i in range(40)]
    async with reranker(served.url("concurrent"), batch_size=2, max_concurrency=3) as client:
        scores = await client.rerank(QUERY, passages)
    assert scores == pytest.approx(expected(QUERY, passages))
    assert 1 < served.app.most_in_flight <= 3


@pytest.mark.parametrize("batch_size", [32, 2])
async def test_a_slow_answer_fails_within_the_timeout(served: Served, batch_size: int) -> None:
    async with reranker(served.url("slow"), timeout=0.5, batch_size=batch_size) as client:
        started = time.monotonic()
        with pytest.raises(RerankFailed) as failure:
            await client.rerank(QUERY, PASSAGES)
        elapsed = time.monotonic() - started
    assert elapsed < 0.5 + 0.5
    assert "0.5 s" in failure.value.message
    assert_clean(failure.value)


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("fails", "HTTP 500"),
        ("nonjson", "not JSON"),
        ("short", "3 results for 4 passages"),
        ("nan", "not a finite number"),
        ("repeat", "same index twice"),
        ("range", "out of range"),
        ("stringly", "not a finite number"),
        ("redirect", "HTTP 307"),
        ("nowhere", "HTTP 404"),
    ],
)
async def test_a_broken_answer_is_a_clean_rerank_failure(
    served: Served, kind: str, words: str
) -> None:
    passages = PASSAGES if kind != "nan" else [SECRET_PASSAGE]
    async with reranker(served.url(kind)) as client:
        with pytest.raises(RerankFailed) as failure:
            await client.rerank(QUERY, passages if kind != "fails" else [SECRET_PASSAGE])
    assert words in failure.value.message
    assert_clean(failure.value)


async def test_a_wrong_key_is_refused_without_the_key_in_the_message(served: Served) -> None:
    wrong = "rk-wrong-key-0123456789"
    async with reranker(served.url("cohere"), api_key=wrong, model="m") as client:
        with pytest.raises(RerankFailed) as failure:
            await client.rerank(QUERY, PASSAGES)
    assert "HTTP 401" in failure.value.message
    assert wrong not in failure.value.message


async def test_no_key_sends_no_authorization_header(served: Served) -> None:
    async with reranker(served.url("concurrent"), api_key=None) as client:
        await client.rerank(QUERY, PASSAGES[:1])
    assert "authorization" not in served.seen("concurrent")[-1].headers


async def test_a_refused_connection_is_a_rerank_failure() -> None:
    async with reranker(f"http://127.0.0.1:{free_port()}/rerank") as client:
        with pytest.raises(RerankFailed) as failure:
            await client.rerank(QUERY, [SECRET_PASSAGE])
    assert "could not be reached" in failure.value.message
    assert_clean(failure.value)


async def test_a_refusal_merely_mentioning_texts_does_not_switch_to_teis_body(
    served: Served,
) -> None:
    async with reranker(served.url("mentions")) as client:
        with pytest.raises(RerankFailed) as failure:
            await client.rerank(QUERY, PASSAGES)
        before = len(served.seen("mentions"))
        with pytest.raises(RerankFailed):
            await client.rerank(QUERY, PASSAGES)
    assert "HTTP 422" in failure.value.message
    # Each call tries TEI's body once; refused, it is not kept for the next call.
    assert before == 2
    sent = [("texts" in seen.body) for seen in served.seen("mentions")]
    assert sent == [False, True, False, True]


async def test_no_passages_send_nothing(served: Served) -> None:
    before = len(served.app.requests)
    async with reranker(served.url("cohere"), model="m") as client:
        assert await client.rerank(QUERY, []) == []
    assert len(served.app.requests) == before


async def test_the_factory_builds_an_http_reranker_for_a_url(served: Served) -> None:
    client = make_reranker(
        served.url("cohere") + "?tenant=x",
        api_key=API_KEY,
        name="rerank-v3.5",
        timeout=5,
        batch_size=32,
    )
    try:
        assert isinstance(client, HttpReranker)
        assert client.name == served.url("cohere")
        await client.warm_up()
        assert await client.rerank(QUERY, PASSAGES) == pytest.approx(expected(QUERY, PASSAGES))
    finally:
        await client.aclose()
