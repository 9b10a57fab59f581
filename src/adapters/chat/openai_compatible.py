"""`ChatModel` for any OpenAI-compatible `POST {base_url}/chat/completions` endpoint (OpenAI,
vLLM, Ollama, llama.cpp), streamed over server-sent events with httpx.

The answer is asked for with `stream: true` and `stream_options: {include_usage: true}`; a
server that refuses `stream_options` (or `max_tokens`, as OpenAI's newer models do) is asked
again without it, and the instance remembers. Tool calls arrive in fragments keyed by `index`
and are emitted whole, with their arguments parsed, once the model finishes. 408, 429 and 5xx
answers and failed connections are retried with backoff, but only before the answer began:
nothing the consumer already received is ever repeated. Every failure ends in `ChatModelError`
with a message fit for the member: no URL, no key, no trace.

Long on purpose until issue 11 ("One way in") replaces it with one OpenAI-compatible client
module for chat, titles, extraction and embeddings and one retry helper; splitting it first
would be done twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec

from adapters.embeddings.openai_compatible import DEFAULT_OPENAI_BASE_URL, retry_after
from application.ports.chat_model import (
    ChatEvent,
    ChatModelError,
    ChatModelInfo,
    ChatRequest,
    ChatTurn,
    Finished,
    TextDelta,
    ToolCall,
    ToolCallRequested,
    ToolSpec,
    Usage,
)

RETRYABLE_STATUSES = frozenset({408, 429})
FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    # The port knows three endings; a filtered answer simply stopped early.
    "content_filter": "stop",
}
MAX_PROVIDER_MESSAGE = 300
DRAIN_TIMEOUT = 1.0
UNREADABLE = "The model provider sent an answer that could not be read."
_SECRET_LIKE = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-*]{6,}")
_URL = re.compile(r"\bhttps?://\S+", re.IGNORECASE)
_jitter = random.SystemRandom()


class _Retry(Exception):
    """The request failed before the answer began and may be sent again."""

    def __init__(self, message: str, delay: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.delay = delay


@dataclass(slots=True)
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class OpenAIChatModel:
    """One model of an OpenAI-compatible chat API.

    `timeout` bounds the whole call, from connecting to the last token; `read_timeout` the
    silence between two pieces of the answer (and before the first); `connect_timeout` the
    connection. The `httpx` client is shared and owned by the caller; this class never closes
    it.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        model: str,
        *,
        base_url: str = DEFAULT_OPENAI_BASE_URL,
        api_key: str | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        max_attempts: int = 3,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        max_retry_after: float = 30.0,
        supports_tools: bool = True,
        context_tokens: int = 8192,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self._client = client
        self._model = model
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key or None
        self._timeout = timeout
        self._read_timeout = min(read_timeout, timeout)
        self._http_timeout = httpx.Timeout(
            connect=min(connect_timeout, timeout),
            read=self._read_timeout,
            write=self._read_timeout,
            pool=min(connect_timeout, timeout),
        )
        self._max_attempts = max_attempts
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._max_retry_after = max_retry_after
        self._info = ChatModelInfo(supports_tools=supports_tools, context_tokens=context_tokens)
        self._send_stream_options = True
        self._limit_field = "max_tokens"

    @property
    def info(self) -> ChatModelInfo:
        return self._info

    @property
    def model(self) -> str:
        """The provider's model name."""
        return self._model

    def stream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        return self._events(request)

    async def _events(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        response = await self._open(request, deadline)
        try:
            if response.headers.get("content-type", "").startswith("application/json"):
                # A server that ignores `stream: true` answers with one JSON document.
                for event in await self._whole_answer(response, deadline):
                    yield event
                return
            async for event in self._stream_answer(response, deadline):
                yield event
        finally:
            await response.aclose()

    async def _open(self, request: ChatRequest, deadline: float) -> httpx.Response:
        attempt = 1
        while True:
            try:
                return await self._send(request, deadline)
            except _Retry as failure:
                if attempt >= self._max_attempts:
                    raise ChatModelError(failure.message) from None
                delay = self._delay(attempt, failure.delay)
                if asyncio.get_running_loop().time() + delay >= deadline:
                    raise ChatModelError(failure.message) from None
            await asyncio.sleep(delay)
            attempt += 1

    async def _send(self, request: ChatRequest, deadline: float) -> httpx.Response:
        """Sends the request and returns the response once its status is 200 and its body is
        about to stream; adapts to a server's refusals of optional fields on the way."""
        while True:
            http_request = self._client.build_request(
                "POST",
                self._url,
                json=self._payload(request),
                headers=self._headers(),
                timeout=self._http_timeout,
            )
            try:
                async with asyncio.timeout_at(deadline):
                    response = await self._client.send(http_request, stream=True)
            except TimeoutError:
                raise ChatModelError(self._overall_timeout()) from None
            except httpx.ConnectTimeout:
                raise _Retry("The model provider could not be reached in time.") from None
            except httpx.PoolTimeout:
                raise ChatModelError("Too many calls to the model provider are open.") from None
            except httpx.ConnectError:
                raise _Retry("The model provider could not be reached.") from None
            except httpx.TimeoutException:
                raise ChatModelError(self._silence()) from None
            except httpx.TransportError:
                raise _Retry("The connection to the model provider failed.") from None
            if response.status_code == 200:
                return response
            try:
                async with asyncio.timeout_at(deadline):
                    body = (await response.aread()).decode("utf-8", "replace")
            except (TimeoutError, httpx.HTTPError):
                body = ""
            finally:
                await response.aclose()
            if not self._adapted(response.status_code, body):
                self._raise_for(response, body)

    def _adapted(self, status: int, body: str) -> bool:
        """Whether the request was changed to suit a server that refused an optional field."""
        if status not in (400, 422):
            return False
        if self._send_stream_options and "stream_options" in body:
            self._send_stream_options = False
            return True
        if self._limit_field == "max_tokens" and "max_completion_tokens" in body:
            self._limit_field = "max_completion_tokens"
            return True
        return False

    def _raise_for(self, response: httpx.Response, body: str) -> None:
        status = response.status_code
        if status in RETRYABLE_STATUSES or status >= 500:
            what = "is overloaded" if status == 429 else "kept failing"
            raise _Retry(
                f"The model provider {what} (HTTP {status}).", retry_after(response.headers)
            )
        message = self._provider_message(body)
        detail = f": {message}" if message else ""
        raise ChatModelError(f"The model provider refused the request (HTTP {status}){detail}")

    def _delay(self, attempt: int, requested: float | None) -> float:
        if requested is not None:
            return min(max(requested, 0.0), self._max_retry_after)
        ceiling = min(self._backoff_max, self._backoff_base * 2 ** (attempt - 1))
        # Jitter spreads the retries of many conversations hit by the same outage.
        return _jitter.uniform(ceiling / 2, ceiling)

    def _payload(self, request: ChatRequest) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": request.model or self._model,
            "messages": [_message(turn) for turn in request.turns],
            "stream": True,
            self._limit_field: request.max_output_tokens,
        }
        if self._send_stream_options:
            payload["stream_options"] = {"include_usage": True}
        if request.temperature is not None:
            payload["temperature"] = request.temperature
        if request.tools:
            payload["tools"] = [_tool(spec) for spec in request.tools]
            if request.tool_choice is not None:
                payload["tool_choice"] = _tool_choice(request.tool_choice)
        return payload

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    async def _stream_answer(
        self, response: httpx.Response, deadline: float
    ) -> AsyncIterator[ChatEvent]:
        # The body is split into lines here, per network read, rather than by httpx line by
        # line: a read usually carries many events, and each await under a deadline costs.
        reads = response.aiter_bytes()
        answer = _Answer()
        partial = b""
        done = False
        clock = asyncio.get_running_loop().time
        while not done:
            try:
                if deadline - clock() > self._read_timeout:
                    # httpx's read timeout ends a silence before the deadline could, so the
                    # deadline needs no timer of its own (one per read costs) until it nears.
                    data = await anext(reads)
                else:
                    async with asyncio.timeout_at(deadline):
                        data = await anext(reads)
            except StopAsyncIteration:
                break
            except TimeoutError:
                raise ChatModelError(self._overall_timeout()) from None
            except httpx.TimeoutException:
                raise ChatModelError(self._silence()) from None
            except httpx.HTTPError:
                raise ChatModelError(
                    "The connection to the model provider was lost while it was answering."
                ) from None
            lines = (partial + data).split(b"\n")
            partial = lines.pop()
            for event in self._line_events(lines, answer):
                if event is None:
                    done = True
                    break
                yield event
        if done:
            await self._drain(reads)
        elif partial.strip():
            for event in self._line_events([partial], answer):
                if event is None:
                    done = True
                    break
                yield event
        if not done and answer.finish is None:
            raise ChatModelError("The model provider's answer ended before it was complete.")
        for event in answer.ending():
            yield event

    def _line_events(self, lines: list[bytes], answer: _Answer) -> Iterator[ChatEvent | None]:
        """The events of complete server-sent-event lines, one by one, so that what came
        before an unreadable line is delivered; `None` marks `data: [DONE]`."""
        for line in lines:
            if not line.startswith(b"data:"):
                # Blank separators, `: keep-alive` comments, `event:` and `id:` fields.
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                yield None
                return
            try:
                chunk = msgspec.json.decode(data)
            except msgspec.DecodeError:
                raise ChatModelError(UNREADABLE) from None
            yield from self._chunk_events(chunk, answer)

    @staticmethod
    async def _drain(reads: AsyncIterator[bytes]) -> None:
        """Read what follows `[DONE]` (the end of the body), so that the connection goes back
        to the pool instead of being closed half-read."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(DRAIN_TIMEOUT):
                async for _ in reads:
                    pass

    def _chunk_events(self, chunk: object, answer: _Answer) -> list[ChatEvent]:
        if not isinstance(chunk, dict):
            raise ChatModelError(UNREADABLE)
        error = chunk.get("error")
        if error is not None:
            message = self._provider_message(json.dumps({"error": error}))
            detail = f": {message}" if message else "."
            raise ChatModelError(f"The model provider failed while answering{detail}")
        answer.take_usage(chunk.get("usage"))
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            if "usage" in chunk:
                return []
            raise ChatModelError(UNREADABLE)
        events: list[ChatEvent] = []
        for choice in choices:
            if not isinstance(choice, dict):
                raise ChatModelError(UNREADABLE)
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                content = delta.get("content")
                if isinstance(content, str) and content:
                    events.append(TextDelta(content))
                tool_calls = delta.get("tool_calls")
                if tool_calls:
                    answer.take_tool_calls(tool_calls)
            elif delta is not None:
                raise ChatModelError(UNREADABLE)
            reason = choice.get("finish_reason")
            if reason:
                events.extend(answer.finish_with(str(reason)))
        return events

    async def _whole_answer(self, response: httpx.Response, deadline: float) -> list[ChatEvent]:
        try:
            async with asyncio.timeout_at(deadline):
                body = json.loads(await response.aread())
        except TimeoutError:
            raise ChatModelError(self._overall_timeout()) from None
        except httpx.TimeoutException:
            raise ChatModelError(self._silence()) from None
        except httpx.HTTPError:
            raise ChatModelError("The connection to the model provider was lost.") from None
        except ValueError:
            raise ChatModelError(UNREADABLE) from None
        if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
            raise ChatModelError(UNREADABLE)
        streamed = {
            **body,
            "choices": [
                {**choice, "delta": choice.get("message")} if isinstance(choice, dict) else choice
                for choice in body["choices"]
            ],
        }
        answer = _Answer()
        events = self._chunk_events(streamed, answer)
        if answer.finish is None:
            events.extend(answer.finish_with("stop"))
        events.extend(answer.ending())
        return events

    def _provider_message(self, body: str) -> str:
        """The provider's own explanation, without anything resembling a credential or URL."""
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = body
        error = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
        if isinstance(error, dict):
            error = error.get("message") or error.get("detail") or ""
        message = str(error)
        if self._api_key is not None:
            message = message.replace(self._api_key, "[redacted]")
        message = _SECRET_LIKE.sub("[redacted]", message)
        message = _URL.sub("[link]", message)
        message = " ".join(message.split())
        if len(message) > MAX_PROVIDER_MESSAGE:
            message = message[: MAX_PROVIDER_MESSAGE - 3] + "..."
        return message

    def _overall_timeout(self) -> str:
        return f"The model provider did not finish its answer within {self._timeout:g} s."

    def _silence(self) -> str:
        return f"The model provider stopped answering for more than {self._read_timeout:g} s."


class _Answer:
    """What one streamed answer has said so far, beyond its text."""

    __slots__ = ("calls", "emitted", "finish", "usage")

    def __init__(self) -> None:
        self.calls: dict[int, _PendingCall] = {}
        self.emitted = False
        self.finish: str | None = None
        self.usage: Usage | None = None

    def take_usage(self, usage: object) -> None:
        if not isinstance(usage, dict):
            return
        prompt = _count(usage.get("prompt_tokens"))
        completion = _count(usage.get("completion_tokens"))
        if prompt is not None and completion is not None:
            self.usage = Usage(input_tokens=prompt, output_tokens=completion)

    def take_tool_calls(self, fragments: object) -> None:
        if not isinstance(fragments, list):
            raise ChatModelError(UNREADABLE)
        for fragment in fragments:
            if not isinstance(fragment, dict):
                raise ChatModelError(UNREADABLE)
            index = _count(fragment.get("index"))
            if index is None:
                # A server that sends each call whole may leave out its index.
                index = len(self.calls)
            call = self.calls.setdefault(index, _PendingCall())
            if isinstance(fragment.get("id"), str) and not call.id:
                call.id = fragment["id"]
            function = fragment.get("function") or {}
            if not isinstance(function, dict):
                raise ChatModelError(UNREADABLE)
            name = function.get("name")
            # Some servers repeat the name in every fragment; it is never split.
            if isinstance(name, str) and name and not call.name:
                call.name = name
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                call.arguments.append(arguments)
            elif isinstance(arguments, dict):
                call.arguments.append(json.dumps(arguments))

    def finish_with(self, reason: str) -> list[ChatEvent]:
        """The tool calls, complete now that the model stopped; records why it stopped."""
        self.finish = FINISH_REASONS.get(reason, "stop")
        if not self.calls or self.emitted:
            return []
        self.emitted = True
        if self.finish == "stop":
            self.finish = "tool-calls"
        return [
            ToolCallRequested(_parsed(index, call)) for index, call in sorted(self.calls.items())
        ]

    def ending(self) -> list[ChatEvent]:
        events: list[ChatEvent] = []
        if self.finish is None:
            events.extend(self.finish_with("stop"))
        if self.usage is not None:
            events.append(self.usage)
        events.append(Finished(self.finish or "stop"))
        return events


def _parsed(index: int, call: _PendingCall) -> ToolCall:
    if not call.name:
        raise ChatModelError("The model asked for a tool call without naming the tool.")
    raw = "".join(call.arguments).strip() or "{}"
    try:
        arguments = json.loads(raw)
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        raise ChatModelError(
            f"The model asked for tool '{call.name}' with arguments that are not a JSON object."
        )
    return ToolCall(
        id=call.id or f"call_{index}_{uuid.uuid4().hex[:12]}", name=call.name, arguments=arguments
    )


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _message(turn: ChatTurn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": turn.role, "content": turn.content}
    if turn.role == "assistant" and turn.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in turn.tool_calls
        ]
    if turn.role == "tool":
        message["tool_call_id"] = turn.tool_call_id or ""
    return message


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


def _tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}
