"""`serve`'s HTTP protocol (uvicorn + httptools, `entrypoints.http.server`) refuses a request
head over 64 KiB with 431 before the app runs, on a real socket (issue 12)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn

from entrypoints.http.server import HEAD_TOO_LARGE, MAX_REQUEST_HEAD, BoundedHttpToolsProtocol

READ_SIZE = 256 * 1024  # the most an event loop's transport reads at once


class Recording(BoundedHttpToolsProtocol):
    """Notes how many head bytes it had counted when it refused."""

    refused_at: list[int] = []

    def _refuse_head(self) -> None:
        Recording.refused_at.append(self._head_bytes)
        super()._refuse_head()


class App:
    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.calls += 1
        size = sum(len(k) + len(v) for k, v in scope["headers"])
        body = str(size).encode()
        headers = [(b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def serving(app: Any, port: int, protocol: type) -> AsyncIterator[None]:
    """uvicorn serving `app` on `port` with the HTTP `protocol`, until the block ends."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        http=protocol,
        lifespan="off",
        log_config=None,
        access_log=False,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn offers no event to wait on)
        await asyncio.sleep(0.01)
    try:
        yield
    finally:
        server.should_exit = True
        await task


@pytest.fixture
async def served(unused_tcp_port) -> AsyncIterator[tuple[App, int]]:
    app = App()
    async with serving(app, unused_tcp_port, Recording):
        Recording.refused_at.clear()
        yield app, unused_tcp_port


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if line)
    body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), 5)
    return int(lines[0].split()[1]), headers, body


async def refused(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes
) -> tuple[int, dict[str, str], bytes, int]:
    """Send `data` 16 KiB at a time until the server answers: the answer and the bytes sent."""
    answer = asyncio.create_task(read_response(reader))
    sent = 0
    while sent < len(data) and not answer.done():
        writer.write(data[sent : sent + 16 * 1024])
        sent += 16 * 1024
        try:
            await writer.drain()
        except ConnectionError:
            break
        await asyncio.sleep(0.01)
    status, headers, body = await answer
    return status, headers, body, sent


def request(path: str = "/", headers: dict[str, str] | None = None) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: test"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def test_an_8_mb_authorization_header_is_refused_with_431_before_the_app(served):
    app, port = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    huge = request(headers={"Authorization": "Bearer " + "a" * (8 * 1024 * 1024)})
    status, headers, body, sent = await refused(reader, writer, huge)
    assert status == 431
    assert json.loads(body) == {"error": "Request Header Fields Too Large"}
    assert headers["content-type"] == "application/json" and headers["x-request-id"]
    assert await asyncio.wait_for(reader.read(), 5) == b""  # the server closed the connection
    writer.close()
    assert app.calls == 0
    assert sent < 1024 * 1024
    (counted,) = Recording.refused_at
    assert MAX_REQUEST_HEAD < counted <= MAX_REQUEST_HEAD + READ_SIZE


async def test_a_client_sending_its_whole_head_at_once_reads_the_431(served):
    app, port = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = asyncio.create_task(read_response(reader))
    writer.write(request(headers={"Authorization": "Bearer " + "a" * (8 * 1024 * 1024)}))
    await writer.drain()  # the server reads and drops the rest instead of resetting
    status, _, body = await answer
    writer.close()
    assert (status, json.loads(body), app.calls) == (431, {"error": HEAD_TOO_LARGE}, 0)
    (counted,) = Recording.refused_at
    assert counted <= MAX_REQUEST_HEAD + 2 * READ_SIZE


async def test_a_long_request_line_is_refused_too(served):
    app, port = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    status, *_ = await refused(reader, writer, request("/" + "a" * (200 * 1024)))
    writer.close()
    assert (status, app.calls) == (431, 0)


async def test_heads_under_the_limit_pass_request_after_request(served):
    app, port = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    padding = {f"x-pad-{i}": "p" * 1024 for i in range(40)}
    for _ in range(3):  # keep-alive: each request's head is counted on its own
        writer.write(request(headers=padding))
        await writer.drain()
        status, _, body = await read_response(reader)
        assert status == 200 and int(body) > 40 * 1024
    writer.close()
    assert app.calls == 3 and Recording.refused_at == []


async def test_many_small_headers_adding_up_past_the_limit_are_refused(served):
    app, port = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    padding = {f"x-pad-{i}": "p" * 100 for i in range(2000)}
    status, *_ = await refused(reader, writer, request(headers=padding))
    writer.close()
    assert (status, app.calls) == (431, 0)
