"""`ChatModel` for any OpenAI-compatible `POST {base_url}/chat/completions` endpoint (OpenAI,
vLLM, Ollama, llama.cpp), streamed over server-sent events with httpx.

The answer is asked for with `stream: true` and `stream_options: {include_usage: true}`; a
server that refuses an optional field (`stream_options`, `max_tokens` as OpenAI's newer models
do, or a `json_schema` response format) is asked again without it, and the instance remembers
(see `openai_request`). 408, 409, 429 and 5xx answers and failed connections are retried with
the gateway's backoff (`adapters.openai_gateway.retry`), but only before the answer began:
nothing the consumer already received is ever repeated. Every failure ends in `ChatModelError`
with a message fit for the member: no URL, no key, no trace. The events are read by `openai_stream`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from adapters.chat.openai_request import SchemaFormat, payload
from adapters.chat.openai_stream import (
    UNREADABLE,
    Answer,
    line_events,
    whole_answer_events,
)
from adapters.openai_gateway.gateway import OpenAIGateway
from adapters.openai_gateway.retry import (
    CHAT_RETRY,
    GaveUp,
    Retryable,
    RetryPolicy,
    is_retryable_status,
    is_retryable_transport,
    retry_after,
)
from application.ports.chat_model import (
    ChatEvent,
    ChatModelError,
    ChatModelInfo,
    ChatRequest,
)

DRAIN_TIMEOUT = 1.0


class OpenAIChatModel:
    """One model of an OpenAI-compatible chat API, reached through `gateway`.

    `timeout` bounds the whole call, from connecting to the last token; `read_timeout` the
    silence between two pieces of the answer (and before the first); `connect_timeout` the
    connection. `retry` says how often and how patiently a call that failed before its answer
    began is sent again.
    """

    def __init__(
        self,
        gateway: OpenAIGateway,
        model: str,
        *,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        retry: RetryPolicy = CHAT_RETRY,
        supports_tools: bool = True,
        context_tokens: int = 8192,
    ) -> None:
        self._gateway = gateway
        self._client = gateway.client
        self._model = model
        self._url = gateway.url("chat/completions")
        self._headers = gateway.headers("text/event-stream")
        self._timeout = timeout
        self._read_timeout = min(read_timeout, timeout)
        self._http_timeout = httpx.Timeout(
            connect=min(connect_timeout, timeout),
            read=self._read_timeout,
            write=self._read_timeout,
            pool=min(connect_timeout, timeout),
        )
        self._retry = retry
        self._info = ChatModelInfo(supports_tools=supports_tools, context_tokens=context_tokens)
        self._send_stream_options = True
        self._limit_field = "max_tokens"
        self._schema_format: SchemaFormat = "json_schema"

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
        try:
            return await self._retry.run(lambda: self._send(request, deadline), deadline=deadline)
        except GaveUp as failure:
            raise ChatModelError(failure.message) from None

    async def _send(self, request: ChatRequest, deadline: float) -> httpx.Response:
        """Sends the request and returns the response once its status is 200 and its body is
        about to stream; adapts to a server's refusals of optional fields on the way."""
        while True:
            http_request = self._client.build_request(
                "POST",
                self._url,
                json=self._payload(request),
                headers=self._headers,
                timeout=self._http_timeout,
            )
            try:
                async with asyncio.timeout_at(deadline):
                    response = await self._client.send(http_request, stream=True)
            except TimeoutError:
                raise ChatModelError(self._overall_timeout()) from None
            except httpx.TransportError as error:
                raise self._transport_failure(error) from None
            if response.status_code == 200:
                return response
            try:
                async with asyncio.timeout_at(deadline):
                    body = (await response.aread()).decode("utf-8", "replace")
            except (TimeoutError, httpx.HTTPError):
                body = ""
            finally:
                await response.aclose()
            if not self._adapted(request, response.status_code, body):
                self._raise_for(response, body)

    def _transport_failure(self, error: httpx.TransportError) -> Exception:
        if not is_retryable_transport(error, timeouts=False):
            if isinstance(error, httpx.PoolTimeout):
                return ChatModelError("Too many calls to the model provider are open.")
            return ChatModelError(self._silence())
        if isinstance(error, httpx.ConnectTimeout):
            return Retryable("The model provider could not be reached in time.")
        if isinstance(error, httpx.ConnectError):
            return Retryable("The model provider could not be reached.")
        return Retryable("The connection to the model provider failed.")

    def _adapted(self, request: ChatRequest, status: int, body: str) -> bool:
        """Whether the request was changed to suit a server that refused an optional field."""
        if (
            request.response_schema is not None
            and self._schema_format == "json_schema"
            and "response_format" in body
        ):
            # llama-cpp-python takes a schema only inside `{type: json_object}`.
            self._schema_format = "json_object"
            return True
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
        if is_retryable_status(status):
            what = "is overloaded" if status == 429 else "kept failing"
            raise Retryable(
                f"The model provider {what} (HTTP {status}).", retry_after(response.headers)
            )
        message = self._gateway.provider_error(body).message
        detail = f": {message}" if message else ""
        raise ChatModelError(f"The model provider refused the request (HTTP {status}){detail}")

    def _payload(self, request: ChatRequest) -> dict[str, Any]:
        return payload(
            request,
            self._model,
            limit_field=self._limit_field,
            stream_options=self._send_stream_options,
            schema_format=self._schema_format,
        )

    async def _stream_answer(
        self, response: httpx.Response, deadline: float
    ) -> AsyncIterator[ChatEvent]:
        # The body is split into lines here, per network read, rather than by httpx line by
        # line: a read usually carries many events, and each await under a deadline costs.
        reads = response.aiter_bytes()
        gateway = self._gateway
        answer = Answer()
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
            for event in line_events(lines, answer, gateway):
                if event is None:
                    done = True
                    break
                yield event
        if done:
            await self._drain(reads)
        elif partial.strip():
            for event in line_events([partial], answer, gateway):
                if event is None:
                    done = True
                    break
                yield event
        if not done and answer.finish is None:
            raise ChatModelError("The model provider's answer ended before it was complete.")
        for event in answer.ending():
            yield event

    @staticmethod
    async def _drain(reads: AsyncIterator[bytes]) -> None:
        """Read what follows `[DONE]` (the end of the body), so that the connection goes back
        to the pool instead of being closed half-read."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(DRAIN_TIMEOUT):
                async for _ in reads:
                    pass

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
        return whole_answer_events(body, self._gateway)

    def _overall_timeout(self) -> str:
        return f"The model provider did not finish its answer within {self._timeout:g} s."

    def _silence(self) -> str:
        return f"The model provider stopped answering for more than {self._read_timeout:g} s."
