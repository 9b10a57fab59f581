"""`OpenAIChatModel` over real HTTP: against llama-cpp-python's OpenAI-compatible server serving
the bundled SmolLM2, and against a scripted server on loopback for what a real server will not
do on demand (stall, refuse connections, notice a client leaving)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from adapters.chat.openai_compatible import OpenAIChatModel
from adapters.chat.registry import DefaultChatModelRegistry
from adapters.openai_gateway.gateway import OpenAIGateway
from adapters.openai_gateway.retry import RetryPolicy
from application.ports.chat_model import (
    ChatModelError,
    ChatRequest,
    ChatTurn,
    Finished,
    TextDelta,
    ToolCall,
    ToolCallRequested,
    ToolSpec,
    Usage,
)
from tests.conftest import free_port

WEATHER = ToolSpec(
    name="get_weather",
    description="The current weather in a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as http_client:
        yield http_client


def ask(text: str, **options: Any) -> ChatRequest:
    options.setdefault("temperature", 0)
    return ChatRequest(model="smollm2", turns=[ChatTurn(role="user", content=text)], **options)


async def collect(model, request: ChatRequest) -> list:
    return [event async for event in model.stream(request)]


# --- llama-cpp-python's server --------------------------------------------------------------


async def test_a_real_server_streams_text_and_finishes(llama_server, client):
    registry = DefaultChatModelRegistry(OpenAIGateway(client, base_url=llama_server), timeout=120)
    model = registry.get("openai:smollm2")

    events = await collect(model, ask("What is the capital of France?", max_output_tokens=24))

    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1
    assert "".join(d.text for d in deltas).strip()
    assert isinstance(events[-1], Finished)
    assert events[-1].reason in ("stop", "length")
    # This server takes `stream_options` but reports no usage in streams: the adapter yields
    # none rather than inventing figures (the platform then estimates and says so).
    assert not any(isinstance(e, Usage) for e in events)


async def test_a_real_server_stops_at_the_output_limit(llama_server, client):
    model = OpenAIChatModel(OpenAIGateway(client, base_url=llama_server), "smollm2")

    events = await collect(model, ask("Write a long poem about the sea.", max_output_tokens=3))

    assert events[-1] == Finished("length")
    assert 1 <= sum(isinstance(e, TextDelta) for e in events) <= 3


async def test_a_real_server_calls_a_forced_tool(llama_server, client):
    model = OpenAIChatModel(OpenAIGateway(client, base_url=llama_server), "smollm2")
    request = ask(
        "What is the weather in Paris?",
        tools=[WEATHER],
        tool_choice="get_weather",
        max_output_tokens=60,
    )

    events = await collect(model, request)

    calls = [e.call for e in events if isinstance(e, ToolCallRequested)]
    assert len(calls) == 1
    assert calls[0].name == "get_weather"
    assert calls[0].id
    assert isinstance(calls[0].arguments.get("city"), str)
    assert events[-1] == Finished("tool-calls")


async def test_a_real_server_answers_after_a_tool_result(llama_server, client):
    model = OpenAIChatModel(OpenAIGateway(client, base_url=llama_server), "smollm2")
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})
    request = ChatRequest(
        model="smollm2",
        turns=[
            ChatTurn(role="system", content="Answer in one sentence."),
            ChatTurn(role="user", content="What is the weather in Paris?"),
            ChatTurn(role="assistant", tool_calls=(call,)),
            ChatTurn(role="tool", tool_call_id="call_1", content='{"sky": "sunny", "c": 21}'),
        ],
        tools=[WEATHER],
        max_output_tokens=24,
        temperature=0,
    )

    events = await collect(model, request)

    assert any(isinstance(e, TextDelta) and e.text.strip() for e in events)
    assert isinstance(events[-1], Finished)


async def test_a_real_server_answers_with_json_matching_a_schema(llama_server, client):
    # This server refuses `json_schema` and takes `{type: json_object, schema}`: the model
    # falls back once and keeps asking that way.
    schema = {
        "type": "object",
        "properties": {"capital": {"type": "string"}},
        "required": ["capital"],
    }
    model = OpenAIChatModel(OpenAIGateway(client, base_url=llama_server), "smollm2")
    request = ask("What is the capital of France?", max_output_tokens=40, response_schema=schema)

    for _ in range(2):
        events = await collect(model, request)

        text = "".join(e.text for e in events if isinstance(e, TextDelta))
        assert isinstance(json.loads(text)["capital"], str)
        assert events[-1] == Finished("stop")


# --- a scripted server on loopback ----------------------------------------------------------


class ScriptedServer:
    """Answers each request with the next script: bytes to send, or a float to pause (while
    watching whether the client hung up). Remembers each request body and whether the client
    left before the script ended."""

    def __init__(self) -> None:
        self.scripts: list[list[bytes | float]] = []
        self.bodies: list[dict[str, Any]] = []
        self.client_left = asyncio.Event()
        self.server: asyncio.Server | None = None
        self.url = ""

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        self.bodies.append(json.loads(await reader.readexactly(length)))
        try:
            for part in self.scripts.pop(0):
                if isinstance(part, float):
                    try:
                        if await asyncio.wait_for(reader.read(1), part) == b"":
                            self.client_left.set()
                            return
                    except TimeoutError:
                        pass
                else:
                    writer.write(part)
                    await writer.drain()
        finally:
            writer.close()

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()


@contextlib.contextmanager
def on_a_thread(server: ScriptedServer) -> Iterator[ScriptedServer]:
    """`server` served from an event loop of its own, for tests whose own loop is busy (a test
    client reading a stream) or that have none (a real `serve` driven over HTTP)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def sse_head(status: str = "200 OK") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
    ).encode()


def sse_delta(text: str | None = None, finish: str | None = None) -> bytes:
    piece = {} if text is None else {"content": text}
    chunk = {"choices": [{"index": 0, "delta": piece, "finish_reason": finish}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedServer]:
    server = ScriptedServer()
    await server.start()
    yield server
    await server.stop()


async def test_a_stall_between_chunks_times_out(scripted, client):
    scripted.scripts.append([sse_head(), sse_delta("Hel"), 5.0, sse_delta("lo")])
    model = OpenAIChatModel(OpenAIGateway(client, base_url=scripted.url), "m", read_timeout=0.5)
    events: list = []
    started = time.monotonic()

    with pytest.raises(ChatModelError) as failure:
        async for event in model.stream(ask("Hi")):
            events.append(event)

    assert events == [TextDelta("Hel")]
    assert failure.value.message == "The model provider stopped answering for more than 0.5 s."
    assert time.monotonic() - started < 3


async def test_a_429_then_an_answer_over_real_http(scripted, client):
    scripted.scripts.append(
        [
            b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 0\r\ncontent-length: 2\r\n"
            b"connection: close\r\n\r\n{}"
        ]
    )
    scripted.scripts.append([sse_head(), sse_delta("Hi"), sse_delta(finish="stop")])
    model = OpenAIChatModel(OpenAIGateway(client, base_url=scripted.url), "m")

    events = await collect(model, ask("Hi"))

    assert events == [TextDelta("Hi"), Finished("stop")]
    assert len(scripted.bodies) == 2


async def test_closing_the_stream_hangs_up_on_the_server(scripted, client):
    scripted.scripts.append([sse_head(), sse_delta("One"), 10.0, sse_delta("Two")])
    model = OpenAIChatModel(OpenAIGateway(client, base_url=scripted.url), "m")
    events = model.stream(ask("Hi"))

    assert await anext(events) == TextDelta("One")
    await events.aclose()

    await asyncio.wait_for(scripted.client_left.wait(), 5)


async def test_a_refused_connection_is_reported(client):
    model = OpenAIChatModel(
        OpenAIGateway(client, base_url=f"http://127.0.0.1:{free_port()}/v1"),
        "m",
        retry=RetryPolicy(max_attempts=2, backoff_base=0.01),
    )

    with pytest.raises(ChatModelError) as failure:
        await collect(model, ask("Hi"))

    assert failure.value.message == "The model provider could not be reached."
