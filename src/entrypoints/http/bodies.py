"""Raw request bodies (a zip archive, an e-mail) read with a bound, for the routes that take
something other than JSON."""

from __future__ import annotations

from typing import Any

from litestar import Request

from domain.errors import PayloadTooLarge


async def read_bounded(request: Request[Any, Any, Any], limit: int, what: str) -> bytes:
    """The body, refused (413 "<what> may be at most <limit> bytes") as soon as it passes
    `limit` bytes, by its declared length before reading, and while reading, before anything
    parses it."""
    too_large = PayloadTooLarge(f"{what} may be at most {limit} bytes")
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise too_large
    received = bytearray()
    async for chunk in request.stream():
        received += chunk
        if len(received) > limit:
            raise too_large
    return bytes(received)
