"""`serve`'s HTTP protocol closes a connection whose request head does not arrive within the
header timeout (408), a slowloris connection included, and refuses connections past its bound
(503), on a real socket (issue 31 §2.4)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from entrypoints.http.server import HEAD_TOO_SLOW, TOO_MANY_CONNECTIONS, bounded_protocol
from tests.integration.test_request_head_limit import App, read_response, serving

TIMEOUT = 1.0
LIMIT = 5


@pytest.fixture
async def served(unused_tcp_port) -> AsyncIterator[int]:
    async with serving(App(), unused_tcp_port, bounded_protocol(TIMEOUT, LIMIT)):
        yield unused_tcp_port


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bytes:
    """Everything the server sends until it closes the connection."""
    return await asyncio.wait_for(reader.read(), seconds)


def status_and_error(answer: bytes) -> tuple[int, Any]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


async def test_a_head_trickling_in_is_cut_at_the_header_timeout(served):
    reader, writer = await asyncio.open_connection("127.0.0.1", served)
    started = time.monotonic()
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")
    # A byte now and then, as slowloris sends, never completing the head.
    for _ in range(20):
        await asyncio.sleep(0.2)
        if reader.at_eof():
            break
        writer.write(b"X-a: b\r\n")
        await writer.drain()
        if time.monotonic() - started > TIMEOUT + 1:
            break
    answer = await closed_within(reader, 3)
    assert time.monotonic() - started < TIMEOUT + 2
    assert status_and_error(answer) == (408, {"error": HEAD_TOO_SLOW})
    writer.close()


async def test_a_silent_connection_is_closed_and_a_complete_head_is_served(served):
    silent_reader, silent_writer = await asyncio.open_connection("127.0.0.1", served)
    reader, writer = await asyncio.open_connection("127.0.0.1", served)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    status, _, _ = await read_response(reader)
    assert status == 200
    answer = await closed_within(silent_reader, TIMEOUT + 2)
    assert status_and_error(answer)[0] == 408
    # The kept-alive connection's next request gets a head timer of its own, once it begins.
    await asyncio.sleep(TIMEOUT + 0.2)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    status, _, _ = await read_response(reader)
    assert status == 200
    for w in (writer, silent_writer):
        w.close()


async def test_connections_past_the_bound_are_refused_and_the_others_still_served(served):
    held = [await asyncio.open_connection("127.0.0.1", served) for _ in range(LIMIT)]
    reader, writer = await asyncio.open_connection("127.0.0.1", served)
    answer = await closed_within(reader, 5)
    assert status_and_error(answer) == (503, {"error": TOO_MANY_CONNECTIONS})
    writer.close()
    first_reader, first_writer = held[0]
    first_writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    status, _, _ = await read_response(first_reader)
    assert status == 200
    for _, w in held:
        w.close()
