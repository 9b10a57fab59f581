"""uvicorn's httptools protocol with a bound on the size of a request's head.

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
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_REQUEST_HEAD = 64 * 1024
HEAD_TOO_LARGE = "Request Header Fields Too Large"
LINGER_SECONDS = 2.0


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """`HttpToolsProtocol` refusing a request whose line and headers pass `MAX_REQUEST_HEAD`
    bytes (431)."""

    max_request_head = MAX_REQUEST_HEAD

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_open = False
        self._head_bytes = 0
        self._refused = False

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

    def on_headers_complete(self) -> None:
        self._head_open = False
        super().on_headers_complete()

    def _refuse_head(self) -> None:
        self._refused = True
        body = json.dumps({"error": HEAD_TOO_LARGE}).encode()
        content = [b"HTTP/1.1 431 Request Header Fields Too Large\r\n"]
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
