"""The OpenAI-compatible embedder against a real HTTP server on loopback that plays the
`/v1/embeddings` contract, with switches for rate limits, outages, timeouts, too-long inputs and
malformed answers."""

from __future__ import annotations

import hashlib
import json
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from adapters.embeddings.openai_compatible import OpenAICompatibleEmbedder
from adapters.openai_gateway.gateway import OpenAIGateway
from adapters.openai_gateway.retry import RetryPolicy, retry_after
from application.ports.embedder import EmbeddingFailed

API_KEY = "sk-test-secret-0123456789"
DIMS = 8


def vector_for(text: str, dims: int = DIMS) -> list[float]:
    """A deterministic vector: numbers in [-1, 1) drawn from hashes of the text."""
    numbers: list[float] = []
    counter = 0
    while len(numbers) < dims:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        for (value,) in struct.iter_unpack(">I", digest):
            numbers.append(value / 2**31 - 1)
        counter += 1
    return numbers[:dims]


@dataclass
class Scripted:
    """One canned answer for the next request, in place of the normal one."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    sleep: float = 0.0


@dataclass
class Seen:
    headers: dict[str, str]
    body: dict[str, Any]


class EmbeddingsServer:
    """A deterministic OpenAI embeddings endpoint; answers in reverse order to exercise `index`."""

    def __init__(self) -> None:
        self.script: list[Scripted] = []
        self.requests: list[Seen] = []
        self.max_inputs: int | None = None
        self.max_chars: int | None = None
        self.too_long_by_message = False
        self.force_dims: int | None = None
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                raw = self.rfile.read(length)
                body = json.loads(raw) if raw else {}
                with server.lock:
                    server.requests.append(Seen(dict(self.headers.items()), body))
                    scripted = server.script.pop(0) if server.script else None
                if self.path != "/v1/embeddings":
                    self.reply(404, {"error": {"message": "no such route", "code": None}})
                elif scripted is not None:
                    time.sleep(scripted.sleep)
                    if scripted.sleep and not scripted.body:
                        self.reply(200, server.answer(body))
                    else:
                        self.reply_raw(scripted.status, scripted.body, scripted.headers)
                else:
                    status, payload = server.respond(body)
                    self.reply(status, payload)

            def reply(self, status: int, payload: object) -> None:
                self.reply_raw(status, json.dumps(payload).encode(), {})

            def reply_raw(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True).start()

    def respond(self, body: dict[str, Any]) -> tuple[int, object]:
        texts = body["input"]
        too_many = self.max_inputs is not None and len(texts) > self.max_inputs
        too_big = self.max_chars is not None and any(len(t) > self.max_chars for t in texts)
        if too_many or too_big:
            if self.too_long_by_message:
                message = "This model's maximum context length is 8192 tokens, however you asked"
                return 400, {"error": {"message": message, "type": "invalid_request_error"}}
            return 400, {
                "error": {
                    "message": "Input is too long for the model.",
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                }
            }
        return 200, self.answer(body)

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        dims = self.force_dims or body.get("dimensions") or DIMS
        data = [
            {"object": "embedding", "index": i, "embedding": vector_for(text, dims)}
            for i, text in enumerate(body["input"])
        ]
        return {
            "object": "list",
            "data": list(reversed(data)),
            "model": body["model"],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }

    def fail_next(self, *answers: Scripted) -> None:
        self.script.extend(answers)


def json_body(payload: object) -> bytes:
    return json.dumps(payload).encode()


@pytest.fixture
def server() -> Iterator[EmbeddingsServer]:
    server = EmbeddingsServer()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(trust_env=False) as client:
        yield client


@pytest.fixture
def make(server: EmbeddingsServer, client: httpx.AsyncClient):
    def make(
        *,
        api_key: str | None = API_KEY,
        max_attempts: int = 5,
        backoff_base: float = 0.001,
        backoff_max: float = 0.005,
        max_retry_after: float = 60.0,
        **overrides: Any,
    ) -> OpenAICompatibleEmbedder:
        gateway = OpenAIGateway(client, base_url=server.base_url, api_key=api_key)
        retry = RetryPolicy(
            max_attempts=max_attempts,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            max_retry_after=max_retry_after,
        )
        options: dict[str, Any] = {"timeout": 2.0, **overrides}
        return OpenAICompatibleEmbedder(
            gateway, "text-embedding-test", DIMS, retry=retry, **options
        )

    return make


async def test_embeds_in_batches_in_order_with_the_bearer_key(make, server):
    texts = [f"text number {i}" for i in range(5)]

    vectors = await make(batch_size=2).embed(texts)

    assert vectors == [vector_for(t) for t in texts]
    assert [len(r.body["input"]) for r in server.requests] == [2, 2, 1]
    first = server.requests[0]
    assert first.headers["Authorization"] == f"Bearer {API_KEY}"
    assert first.body == {"model": "text-embedding-test", "input": texts[:2]}


async def test_default_batch_size_is_64(make, server):
    texts = [f"t{i}" for i in range(130)]

    assert len(await make().embed(texts)) == 130
    assert [len(r.body["input"]) for r in server.requests] == [64, 64, 2]


async def test_sends_dimensions_only_when_configured(make, server):
    await make(send_dimensions=True).embed(["a"])

    assert server.requests[0].body["dimensions"] == DIMS


async def test_no_authorization_header_without_a_key(make, server):
    await make(api_key=None).embed(["a"])

    assert "Authorization" not in server.requests[0].headers


async def test_empty_input_makes_no_request(make, server):
    assert await make().embed([]) == []
    assert server.requests == []


async def test_retries_after_429_honouring_retry_after(make, server):
    server.fail_next(
        Scripted(429, json_body({"error": {"message": "Rate limit"}}), {"Retry-After": "0.3"})
    )
    embedder = make(backoff_base=0.0, backoff_max=0.0)

    started = time.monotonic()
    vectors = await embedder.embed(["hello"])
    elapsed = time.monotonic() - started

    assert vectors == [vector_for("hello")]
    assert len(server.requests) == 2
    assert elapsed >= 0.29


async def test_retry_after_is_capped(make, server):
    server.fail_next(Scripted(429, b"{}", {"Retry-After": "3600"}))

    started = time.monotonic()
    await make(max_retry_after=0.01).embed(["hello"])

    assert time.monotonic() - started < 5  # against an hour asked for; CI's load needs room


async def test_retries_server_errors_then_succeeds(make, server):
    server.fail_next(Scripted(500, b"oops"), Scripted(503, b""))

    assert await make().embed(["a", "b"]) == [vector_for("a"), vector_for("b")]
    assert len(server.requests) == 3


async def test_gives_up_after_max_attempts(make, server):
    server.fail_next(*[Scripted(502, b"bad gateway") for _ in range(10)])

    with pytest.raises(EmbeddingFailed, match=r"HTTP 502.*after 3 attempts"):
        await make(max_attempts=3).embed(["a"])
    assert len(server.requests) == 3


async def test_retries_a_timeout(make, server):
    server.fail_next(Scripted(sleep=0.6))

    assert await make(timeout=0.2).embed(["slow"]) == [vector_for("slow")]
    assert len(server.requests) == 2


async def test_connection_errors_are_retried_then_fail(client):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    embedder = OpenAICompatibleEmbedder(
        OpenAIGateway(client, base_url=f"http://127.0.0.1:{port}/v1"),
        "m",
        DIMS,
        retry=RetryPolicy(max_attempts=2, backoff_base=0.001),
    )

    with pytest.raises(EmbeddingFailed, match="connection error"):
        await embedder.embed(["a"])


@pytest.mark.parametrize("by_message", [False, True])
async def test_halves_a_batch_refused_as_too_long(make, server, by_message):
    server.max_inputs = 3
    server.too_long_by_message = by_message
    texts = [f"chunk {i}" for i in range(8)]

    vectors = await make(batch_size=8).embed(texts)

    assert vectors == [vector_for(t) for t in texts]
    # 8 refused, 4 refused, 2 + 2 accepted, 4 refused, 2 + 2 accepted.
    assert [len(r.body["input"]) for r in server.requests] == [8, 4, 2, 2, 4, 2, 2]


async def test_a_single_text_still_too_long_fails(make, server):
    server.max_chars = 50
    texts = ["short", "x" * 120, "also short"]

    with pytest.raises(EmbeddingFailed, match="120 characters is too long"):
        await make().embed(texts)


GARBAGE = {
    "not json": b"<html>proxy error</html>",
    "no data": json_body({"object": "list"}),
    "too few": json_body({"data": [{"index": 0, "embedding": [0.0] * DIMS}]}),
    "not a list": json_body({"data": [{"index": 0, "embedding": "abc"}] * 2}),
    "text numbers": json_body(
        {"data": [{"index": i, "embedding": ["1"] * DIMS} for i in range(2)]}
    ),
    "duplicate index": json_body(
        {"data": [{"index": 0, "embedding": [0.0] * DIMS} for _ in range(2)]}
    ),
    "index out of range": json_body(
        {"data": [{"index": i + 5, "embedding": [0.0] * DIMS} for i in range(2)]}
    ),
    "not finite": json_body(
        {"data": [{"index": i, "embedding": [float("nan")] * DIMS} for i in range(2)]}
    ),
    "a list": json_body([1, 2]),
}


@pytest.mark.parametrize("body", GARBAGE.values(), ids=GARBAGE.keys())
async def test_garbage_answers_fail(make, server, body):
    server.fail_next(Scripted(200, body))

    with pytest.raises(EmbeddingFailed):
        await make().embed(["a", "b"])
    assert len(server.requests) == 1


async def test_wrong_dimension_count_fails(make, server):
    server.force_dims = DIMS + 1

    with pytest.raises(EmbeddingFailed, match=f"9-dimensional.*expected {DIMS}"):
        await make().embed(["a"])


async def test_unauthorized_fails_at_once_without_leaking_the_key(make, server):
    message = f"Incorrect API key provided: {API_KEY}. You can find your API key at ..."
    server.fail_next(Scripted(401, json_body({"error": {"message": message, "code": "x"}})))

    with pytest.raises(EmbeddingFailed, match="HTTP 401") as caught:
        await make().embed(["a"])

    assert len(server.requests) == 1
    assert "Incorrect API key provided" in caught.value.message
    assert API_KEY not in caught.value.message
    assert "sk-" not in caught.value.message


async def test_other_client_errors_fail_at_once(make, server):
    body = json_body({"error": {"message": "The model `x` does not exist", "code": None}})
    server.fail_next(Scripted(404, body))

    with pytest.raises(EmbeddingFailed, match="does not exist"):
        await make().embed(["a"])
    assert len(server.requests) == 1


def test_retry_after_forms():
    soon = datetime.now(UTC) + timedelta(seconds=30)

    assert retry_after(httpx.Headers({"retry-after": "7"})) == 7
    assert retry_after(httpx.Headers({"retry-after-ms": "250", "retry-after": "7"})) == 0.25
    assert 25 < (retry_after(httpx.Headers({"retry-after": format_datetime(soon)})) or 0) <= 30
    assert retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert retry_after(httpx.Headers({})) is None


async def test_a_conflict_is_retried(make, server):
    server.fail_next(Scripted(409, json_body({"error": {"message": "Try again"}})))

    assert await make().embed(["a"]) == [vector_for("a")]
    assert len(server.requests) == 2


async def test_retries_after_a_retry_after_date(make, server):
    # An HTTP date has whole seconds: the wait is at most one second here.
    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=1))
    server.fail_next(Scripted(503, b"{}", {"Retry-After": soon}))

    started = time.monotonic()
    assert await make(backoff_base=0.0, backoff_max=0.0).embed(["a"]) == [vector_for("a")]

    assert time.monotonic() - started < 2
    assert len(server.requests) == 2


async def test_a_providers_message_is_scrubbed_of_links(make, server):
    message = "The model `x` does not exist, see https://docs.test/models?key=abc"
    server.fail_next(Scripted(404, json_body({"error": {"message": message}})))

    with pytest.raises(EmbeddingFailed) as caught:
        await make().embed(["a"])

    assert caught.value.message == (
        "The embedding provider refused the request (HTTP 404): "
        "The model `x` does not exist, see [link]"
    )
