"""The SSE framing of the UI message stream: events, keep-alives, the closing [DONE]."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterable, AsyncIterator

import pytest

from domain import chat_stream
from domain.chat_stream import Chunk
from entrypoints.http.sse import (
    DONE,
    KEEP_ALIVE,
    STREAM_FAILED,
    STREAM_HEADERS,
    encode_chunk,
    sse_body,
)


async def from_list(chunks: list[Chunk]) -> AsyncIterator[Chunk]:
    for chunk in chunks:
        yield chunk


async def collect(body: AsyncIterable[bytes]) -> list[bytes]:
    return [frame async for frame in body]


def test_headers_are_the_ai_sdk_ui_message_stream_headers() -> None:
    assert dict(STREAM_HEADERS) == {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        "connection": "keep-alive",
        "x-vercel-ai-ui-message-stream": "v1",
        "x-accel-buffering": "no",
    }


def test_a_chunk_is_one_data_event_of_compact_json() -> None:
    frame = encode_chunk(chat_stream.text_delta("t1", 'Hé "quoted"\nnext line'))

    assert frame.startswith(b"data: ")
    assert frame.endswith(b"\n\n")
    payload = frame[len(b"data: ") : -2]
    assert b"\n" not in payload
    assert b": " not in payload and b", " not in payload
    assert json.loads(payload) == {
        "type": "text-delta",
        "id": "t1",
        "delta": 'Hé "quoted"\nnext line',
    }


def test_done_and_keep_alive_frames() -> None:
    assert DONE == b"data: [DONE]\n\n"
    assert KEEP_ALIVE.startswith(b":")
    assert KEEP_ALIVE.endswith(b"\n\n")


async def test_frames_every_chunk_in_order_then_done() -> None:
    chunks = [
        chat_stream.start("m1"),
        chat_stream.start_step(),
        chat_stream.text_start("t1"),
        chat_stream.text_delta("t1", "Hello"),
        chat_stream.text_end("t1"),
        chat_stream.finish_step(),
        chat_stream.finish(),
    ]

    frames = await collect(sse_body(from_list(chunks)))

    assert frames == [*(encode_chunk(chunk) for chunk in chunks), DONE]


async def test_an_empty_source_still_ends_with_done() -> None:
    assert await collect(sse_body(from_list([]))) == [DONE]


async def test_a_keep_alive_comment_is_sent_during_a_quiet_period_without_losing_the_read() -> None:
    release = asyncio.Event()

    async def slow() -> AsyncIterator[Chunk]:
        yield chat_stream.start("m1")
        await release.wait()
        yield chat_stream.finish()

    body = sse_body(slow(), keep_alive_every=0.01)
    assert await anext(body) == encode_chunk(chat_stream.start("m1"))
    assert await anext(body) == KEEP_ALIVE
    assert await anext(body) == KEEP_ALIVE
    release.set()

    rest = await collect(body)

    # The read pending during the keep-alives delivers its chunk: nothing is dropped.
    assert rest[-2:] == [encode_chunk(chat_stream.finish()), DONE]
    assert set(rest[:-2]) <= {KEEP_ALIVE}


async def test_no_keep_alive_while_chunks_flow() -> None:
    chunks = [chat_stream.text_delta("t1", str(n)) for n in range(50)]

    frames = await collect(sse_body(from_list(chunks), keep_alive_every=5.0))

    assert KEEP_ALIVE not in frames
    assert frames[-1] == DONE


async def test_a_failing_source_ends_with_a_generic_error_chunk_then_done() -> None:
    async def failing() -> AsyncIterator[Chunk]:
        yield chat_stream.start("m1")
        raise RuntimeError("connection to /var/run/secret.sock refused")

    frames = await collect(sse_body(failing()))

    assert frames == [
        encode_chunk(chat_stream.start("m1")),
        encode_chunk(chat_stream.error(STREAM_FAILED)),
        DONE,
    ]
    assert b"secret" not in b"".join(frames)


async def test_a_source_failing_after_the_response_ended_adds_no_error_chunk() -> None:
    async def failing_late() -> AsyncIterator[Chunk]:
        yield chat_stream.finish()
        raise RuntimeError("late")

    frames = await collect(sse_body(failing_late()))

    assert frames == [encode_chunk(chat_stream.finish()), DONE]


async def test_the_consumer_leaving_cancels_the_pending_read_and_closes_the_source() -> None:
    reading = asyncio.Event()
    read_cancelled = asyncio.Event()
    source_closed = asyncio.Event()

    async def endless() -> AsyncIterator[Chunk]:
        try:
            yield chat_stream.start("m1")
            reading.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                read_cancelled.set()
                raise
            yield chat_stream.finish()
        finally:
            source_closed.set()

    body = sse_body(endless(), keep_alive_every=0.01)
    assert await anext(body) == encode_chunk(chat_stream.start("m1"))
    assert await anext(body) == KEEP_ALIVE
    assert reading.is_set()

    await body.aclose()

    assert read_cancelled.is_set()
    assert source_closed.is_set()


async def test_the_consumer_task_being_cancelled_cancels_the_pending_read() -> None:
    read_cancelled = asyncio.Event()
    first_frame = asyncio.Event()

    async def endless() -> AsyncIterator[Chunk]:
        yield chat_stream.start("m1")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            read_cancelled.set()
            raise
        yield chat_stream.finish()

    async def consume() -> None:
        async for _ in sse_body(endless(), keep_alive_every=60.0):
            first_frame.set()

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(first_frame.wait(), timeout=5)
    await asyncio.sleep(0)
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer

    assert read_cancelled.is_set()


async def test_the_consumer_leaving_between_chunks_closes_the_source() -> None:
    source_closed = asyncio.Event()

    async def source() -> AsyncIterator[Chunk]:
        try:
            yield chat_stream.start("m1")
            yield chat_stream.finish()
        finally:
            source_closed.set()

    body = sse_body(source())
    assert await anext(body) == encode_chunk(chat_stream.start("m1"))

    await body.aclose()

    assert source_closed.is_set()
