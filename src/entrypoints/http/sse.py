"""Server-sent events framing of the AI SDK UI message stream protocol v1.

Mirrors the `ai` package (major version 5): `UI_MESSAGE_STREAM_HEADERS` for the headers and
`JsonToSseTransformStream` for the framing, one `data: <JSON>` event per chunk and a final
`data: [DONE]`. Keep-alives are SSE comments, which every event-stream parser skips.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Mapping
from typing import Any, Final

import msgspec
import structlog

from domain import chat_stream
from domain.chat_stream import Chunk

log = structlog.get_logger("agent_platform.http.sse")

STREAM_HEADERS: Final[Mapping[str, str]] = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-vercel-ai-ui-message-stream": "v1",
    # Tells nginx-style proxies not to buffer the stream.
    "x-accel-buffering": "no",
}
DONE: Final = b"data: [DONE]\n\n"
KEEP_ALIVE: Final = b": keep-alive\n\n"
STREAM_FAILED: Final = "The response stream was interrupted. Please try again."

_encoder = msgspec.json.Encoder()
_END: Final = object()


def encode_chunk(chunk: Chunk) -> bytes:
    """One SSE event carrying `chunk` as compact JSON (JSON escapes newlines, so one line)."""
    return b"data: " + _encoder.encode(chunk) + b"\n\n"


async def _next(iterator: AsyncIterator[Chunk]) -> Any:
    try:
        return await anext(iterator)
    except StopAsyncIteration:
        return _END


async def sse_body(
    chunks: AsyncIterable[Chunk], keep_alive_every: float = 15.0
) -> AsyncGenerator[bytes, None]:
    """The response body for `chunks`: one event per chunk, a keep-alive comment after every
    `keep_alive_every` seconds without one, and always `DONE` last.

    A failing source ends the stream with a generic `error` chunk (the detail goes to the
    log), unless the response had already ended. When the consumer goes away (client
    disconnect, cancellation), the pending read of `chunks` is cancelled and `chunks` closed.
    """
    iterator = aiter(chunks)
    pending: asyncio.Task[Any] | None = None
    ended = False
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(_next(iterator))
            # A timed-out wait leaves the read running, so no chunk is lost to a keep-alive.
            done, _ = await asyncio.wait({pending}, timeout=keep_alive_every)
            if not done:
                yield KEEP_ALIVE
                continue
            read, pending = pending, None
            try:
                chunk = read.result()
            except Exception:
                log.exception("chat stream source failed")
                if not ended:
                    yield encode_chunk(chat_stream.error(STREAM_FAILED))
                break
            if chunk is _END:
                break
            ended = chat_stream.is_ending(chunk)
            yield encode_chunk(chunk)
        yield DONE
    finally:
        if pending is not None:
            pending.cancel()
            await asyncio.wait({pending})
            if not pending.cancelled() and pending.exception() is not None:
                log.warning("chat stream source failed after its reader left")
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()
