"""Server-sent events framing of the AI SDK UI message stream protocol v1.

Mirrors the `ai` package (major version 5): `UI_MESSAGE_STREAM_HEADERS` for the headers and
`JsonToSseTransformStream` for the framing, one `data: <JSON>` event per chunk and a final
`data: [DONE]`. Keep-alives are SSE comments, which every event-stream parser skips.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterable, Mapping, Sequence
from typing import Final

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


def encode_chunk(chunk: Chunk) -> bytes:
    """One SSE event carrying `chunk` as compact JSON (JSON escapes newlines, so one line)."""
    return b"data: " + _encoder.encode(chunk) + b"\n\n"


async def sse_body(batches: AsyncIterable[Sequence[Chunk]]) -> AsyncGenerator[bytes, None]:
    """The response body for a run's batches of chunks: one write per batch with one event
    per chunk, a keep-alive comment for an empty batch, and always `DONE` last.

    A failing source ends the stream with a generic `error` chunk (the detail goes to the
    log), unless the response had already ended. When the consumer goes away (client
    disconnect, cancellation), the source is closed.
    """
    iterator = aiter(batches)
    ended = False
    try:
        try:
            async for batch in iterator:
                if not batch:
                    yield KEEP_ALIVE
                    continue
                ended = ended or any(chat_stream.is_ending(chunk) for chunk in batch)
                yield b"".join(encode_chunk(chunk) for chunk in batch)
        except Exception:
            log.exception("chat stream source failed")
            if not ended:
                yield encode_chunk(chat_stream.error(STREAM_FAILED))
        yield DONE
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()
