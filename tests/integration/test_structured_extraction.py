"""The structured extractor through the chat model registry: its OpenAI-compatible path against
a chat endpoint on loopback and against llama-cpp-python's real server, and the bundled model."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from adapters.chat.llama_cpp import LlamaCppChatModel
from adapters.chat.registry import DefaultChatModelRegistry
from adapters.local_model.runner_client import RunnerSettings
from adapters.openai_gateway.gateway import OpenAIGateway
from adapters.openai_gateway.retry import RetryPolicy
from adapters.structured.chat_extractor import ChatStructuredExtractor
from application.ports.structured_extractor import StructuredExtractionFailed
from tests.fakes.chat import unmetered

SCHEMA = {
    "type": "object",
    "properties": {"total": {"type": "number"}, "currency": {"type": "string"}},
    "required": ["total", "currency"],
    "additionalProperties": False,
}


class ChatServer:
    """Answers /v1/chat/completions with the queued replies: (status, content)."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, str]] = []
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                server.requests.append(body)
                status, content = server.replies.pop(0)
                payload = json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": content}}]}
                ).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    server = ChatServer()
    yield server
    server.httpd.shutdown()


async def extract(chat: ChatServer, schema=SCHEMA):
    async with httpx.AsyncClient() as client:
        registry = DefaultChatModelRegistry(
            OpenAIGateway(client, base_url=chat.url, api_key="sk-test"),
            retry=RetryPolicy(max_attempts=2, backoff_base=0.01),
        )
        extractor = ChatStructuredExtractor(registry)
        return await extractor.extract(
            model="openai:gpt-4o-mini",
            schema=schema,
            text="Invoice total: 12.50 EUR",
            file_name="invoice.pdf",
            meter=unmetered(),
        )


async def test_a_valid_answer_is_returned_and_the_schema_sent(chat):
    chat.replies.append((200, '{"total": 12.5, "currency": "EUR"}'))
    assert await extract(chat) == {"total": 12.5, "currency": "EUR"}
    (request,) = chat.requests
    assert request["model"] == "gpt-4o-mini"
    assert request["response_format"]["json_schema"]["schema"] == SCHEMA
    assert "Invoice total" in request["messages"][-1]["content"]


@pytest.mark.parametrize(
    ("replies", "message"),
    [
        ([(200, "not json")], "did not answer with JSON"),
        ([(200, "[1, 2]")], "did not answer with a JSON object"),
        ([(200, '{"total": "twelve", "currency": "EUR"}')], "does not match the schema at total"),
        ([(200, '{"total": 1}')], "does not match the schema"),
        ([(500, ""), (503, "")], r"kept failing \(HTTP 503\)"),
        ([(401, "")], r"refused the request \(HTTP 401\)"),
    ],
)
async def test_bad_answers_fail_with_a_reason(chat, replies, message):
    chat.replies.extend(replies)
    with pytest.raises(StructuredExtractionFailed, match=message):
        await extract(chat)


async def test_a_retry_after_a_server_error_succeeds(chat):
    chat.replies.extend([(502, ""), (200, '{"total": 3, "currency": "USD"}')])
    assert await extract(chat) == {"total": 3, "currency": "USD"}


async def test_an_invalid_schema_is_refused_before_calling_the_model(chat):
    with pytest.raises(StructuredExtractionFailed, match="not a valid JSON Schema"):
        await extract(chat, schema={"type": "object", "properties": {"a": {"type": "nope"}}})
    assert chat.requests == []


async def test_the_bundled_model_fills_a_schema():
    schema = {
        "type": "object",
        "properties": {"holidayDays": {"type": "integer"}},
        "required": ["holidayDays"],
    }
    local = LlamaCppChatModel(RunnerSettings(threads=2))
    try:
        async with httpx.AsyncClient() as client:
            registry = DefaultChatModelRegistry(
                OpenAIGateway(client, base_url="http://127.0.0.1:9/v1"), local_model=local
            )
            extractor = ChatStructuredExtractor(registry)
            data = await extractor.extract(
                model="local:smollm2-135m",
                schema=schema,
                text="# Holidays\n\nEveryone gets 30 days of paid holiday every year.",
                file_name="handbook.md",
                meter=unmetered(),
            )
    finally:
        await local.aclose()
    assert data == {"holidayDays": 30}


async def test_a_real_openai_compatible_server_fills_the_schema(llama_server):
    # llama-cpp-python's server refuses `json_schema` and takes `json_object` with a schema:
    # the extractor falls back and remembers.
    schema = {
        "type": "object",
        "properties": {"holidayDays": {"type": "integer"}},
        "required": ["holidayDays"],
    }
    async with httpx.AsyncClient() as client:
        extractor = ChatStructuredExtractor(
            DefaultChatModelRegistry(OpenAIGateway(client, base_url=llama_server))
        )
        for _ in range(2):
            data = await extractor.extract(
                model="openai:smollm2",
                schema=schema,
                text="# Holidays\n\nEveryone gets 30 days of paid holiday every year.",
                file_name="handbook.md",
                meter=unmetered(),
            )
            assert data == {"holidayDays": 30}
