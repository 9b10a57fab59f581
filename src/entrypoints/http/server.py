"""uvicorn's httptools protocol with bounds on a request's head (its size and how long it may
take to arrive) and on the connections a process holds open.

llhttp (httptools' parser) has no limit of its own on the request line or the headers, and
uvicorn sets none for httptools (`h11_max_incomplete_event_size` applies to h11 only): a client
could make the server hold a header of any size, which httptools builds up by concatenation.
`BoundedHttpToolsProtocol` counts the bytes received while a request's head is being parsed
and, once they pass `MAX_REQUEST_HEAD`, answers 431 `{"error": "Request Header Fields Too
Large"}` and closes the connection before the ASGI app is called. What the client still sends
is read and dropped for `LINGER_SECONDS` first, so that a client still writing its headers
reads the answer instead of a connection reset.

The count starts with the chunk after the one where the request began, and is checked after
each chunk is parsed, so what the parser may have read (and httptools may hold) before the
refusal is at most `MAX_REQUEST_HEAD` plus two of the event loop's reads (uvloop reads up to
256 KiB at a time): well under a megabyte per connection, whatever the client sends.

A connection's head must also be complete within `header_timeout` seconds of the connection's
opening (of the first byte of the next request, on a kept-alive connection), else 408 and the
connection closes: without it, clients sending half a head and then a byte now and then hold
connections for ever (slowloris); uvicorn times only the idle wait between requests. A process
already holding `max_connections` connections answers a new one 503 and closes it.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_REQUEST_HEAD = 64 * 1024
HEAD_TOO_LARGE = "Request Header Fields Too Large"
HEAD_TOO_SLOW = "Request Timeout"
TOO_MANY_CONNECTIONS = "Service Unavailable"
LINGER_SECONDS = 2.0


def bounded_protocol(header_timeout: float, max_connections: int) -> type[HttpToolsProtocol]:
    """`BoundedHttpToolsProtocol` with these bounds (uvicorn builds the protocol itself)."""
    return type(
        "BoundedHttpToolsProtocol",
        (BoundedHttpToolsProtocol,),
        {"header_timeout": float(header_timeout), "max_connections": max_connections},
    )


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """`HttpToolsProtocol` refusing a request whose line and headers pass `MAX_REQUEST_HEAD`
    bytes (431) or take longer than `header_timeout` seconds (408), and a connection past
    `max_connections` (503)."""

    max_request_head = MAX_REQUEST_HEAD
    header_timeout = 10.0
    max_connections = 1000

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_open = False
        self._head_bytes = 0
        self._refused = False
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        full = len(self.server_state.connections) >= self.max_connections
        super().connection_made(transport)
        if full:
            self._refuse(503, TOO_MANY_CONNECTIONS)
            return
        self._time_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def _time_head(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.header_timeout, self._head_too_slow)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if not self._refused and not self.transport.is_closing():
            self._refuse(408, HEAD_TOO_SLOW)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._head_open:
            self._head_bytes += len(data)
        super().data_received(data)
        if self.transport.is_closing():  # uvicorn answered a malformed request itself
            return
        if self._head_open and self._head_bytes > self.max_request_head:
            self._refuse_head()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_open = True
        self._head_bytes = 0
        self._time_head()

    def on_headers_complete(self) -> None:
        self._head_open = False
        self._stop_head_timer()
        super().on_headers_complete()

    def _refuse_head(self) -> None:
        self._refuse(431, HEAD_TOO_LARGE)

    def _refuse(self, status: int, reason: str) -> None:
        """Answer `status` with the contract's error body and close the connection."""
        self._refused = True
        self._stop_head_timer()
        body = json.dumps({"error": reason}).encode()
        content = [f"HTTP/1.1 {status} {reason}\r\n".encode()]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend(
            [
                b"content-type: application/json\r\n",
                b"content-length: " + str(len(body)).encode() + b"\r\n",
                b"x-request-id: " + uuid.uuid4().hex.encode() + b"\r\n",
                b"connection: close\r\n",
                b"\r\n",
                body,
            ]
        )
        self.transport.write(b"".join(content))
        # Closing at once with the client's bytes unread would reset the connection and lose
        # the answer for a client still sending; instead stop writing, discard what still
        # comes for a moment (nothing is kept), then close.
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER_SECONDS, self.transport.close)
        else:
            self.transport.close()
