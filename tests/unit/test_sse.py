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


async def from_list(*batches: list[Chunk]) -> AsyncIterator[list[Chunk]]:
    for batch in batches:
        yield batch


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


async def test_frames_every_chunk_in_order_one_write_per_batch_then_done() -> None:
    first = [chat_stream.start("m1"), chat_stream.start_step(), chat_stream.text_start("t1")]
    second = [chat_stream.text_delta("t1", "Hello"), chat_stream.text_end("t1")]
    third = [chat_stream.finish_step(), chat_stream.finish()]
    frames = await collect(sse_body(from_list(first, second, third)))
    assert frames == [
        b"".join(encode_chunk(c) for c in first),
        b"".join(encode_chunk(c) for c in second),
        b"".join(encode_chunk(c) for c in third),
        DONE,
    ]


async def test_an_empty_source_still_ends_with_done() -> None:
    assert await collect(sse_body(from_list())) == [DONE]


async def test_an_empty_batch_is_a_keep_alive_comment() -> None:
    frames = await collect(
        sse_body(from_list([chat_stream.start("m")], [], [chat_stream.finish()]))
    )
    assert frames[1] == KEEP_ALIVE
    assert frames[-1] == DONE


async def test_a_failing_source_ends_with_a_generic_error_chunk_then_done() -> None:
    async def failing() -> AsyncIterator[list[Chunk]]:
        yield [chat_stream.start("m1")]
        raise RuntimeError("database password=secret")

    frames = await collect(sse_body(failing()))
    assert frames[-2:] == [encode_chunk(chat_stream.error(STREAM_FAILED)), DONE]
    assert b"secret" not in b"".join(frames)


async def test_a_source_failing_after_the_response_ended_adds_no_error_chunk() -> None:
    async def failing_late() -> AsyncIterator[list[Chunk]]:
        yield [chat_stream.start("m1"), chat_stream.finish()]
        raise RuntimeError("late")

    frames = await collect(sse_body(failing_late()))
    assert frames[-1] == DONE
    assert b'"error"' not in b"".join(frames)


async def test_the_consumer_leaving_closes_the_source() -> None:
    closed = asyncio.Event()

    async def endless() -> AsyncIterator[list[Chunk]]:
        try:
            while True:
                yield [chat_stream.start_step()]
                await asyncio.sleep(0)
        finally:
            closed.set()

    body = sse_body(endless())
    assert (await anext(body)).startswith(b"data: ")
    await body.aclose()
    assert closed.is_set()


async def test_the_consumer_task_being_cancelled_closes_the_source() -> None:
    closed = asyncio.Event()
    waiting = asyncio.Event()

    async def quiet() -> AsyncIterator[list[Chunk]]:
        try:
            yield [chat_stream.start("m")]
            waiting.set()
            await asyncio.sleep(60)
            yield []
        finally:
            closed.set()

    async def consume() -> None:
        async for _ in sse_body(quiet()):
            pass

    task = asyncio.create_task(consume())
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert closed.is_set()
