"""The one HTTP stack every tool server request goes through (httpx2, the MCP SDK's client).

Its network backend resolves each connection's host itself, checks every address
(`adapters.tools.addresses`) and connects to a checked address, so a DNS answer cannot change
between the check and the connection; TLS still verifies and names (SNI) the URL's host, as
httpcore2 takes both from the request's origin, not from the address connected to. Response
bodies are counted as they stream and cut at a cap. Proxies from the environment are ignored
(`trust_env=False`): through one, the check would see only the proxy.

What went wrong is noted per operation (`Notes`, in a context variable the SDK's tasks
inherit), because the MCP SDK turns some failures (a refused address inside an SSE stream, an
HTTP status) into generic protocol errors; `explain` picks the member's message from them.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpcore2
import httpx2
from mcp.shared.exceptions import MCPError
from mcp_types import PARSE_ERROR
from pydantic import ValidationError

from adapters.tools.addresses import AddressPolicy, Resolver, allowed_addresses
from application.ports.tool_connector import AddressNotAllowed, ToolServerUnreachable

_PREVIEW = 200


@dataclass(slots=True)
class Notes:
    """What one operation's requests met: a refused address, a body over the cap, the last
    error status and whether a redirect was left unfollowed."""

    refused: AddressNotAllowed | None = None
    too_large: int | None = None
    compressed: bool = False
    status: int | None = None
    redirected: bool = False


_notes: contextvars.ContextVar[Notes | None] = contextvars.ContextVar("tool_notes", default=None)


@contextmanager
def noting() -> Iterator[Notes]:
    """Collect the notes of the requests made inside the block (and the tasks it starts)."""
    notes = Notes()
    token = _notes.set(notes)
    try:
        yield notes
    finally:
        _notes.reset(token)


class ResponseTooLarge(ToolServerUnreachable):
    """A response body went over the cap."""

    def __init__(self, cap: int) -> None:
        super().__init__(f"The tool server answered more than {cap} bytes")


class CompressedResponse(ToolServerUnreachable):
    """A response body came compressed although only `identity` was accepted: the cap counts
    the bytes received, and a small compressed body can inflate to gigabytes."""

    def __init__(self) -> None:
        super().__init__("The tool server answered with a compressed body, which is not accepted")


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """A network backend that connects only to checked addresses of the origin's host."""

    def __init__(
        self,
        policy: AddressPolicy,
        resolver: Resolver,
        inner: httpcore2.AsyncNetworkBackend | None = None,
    ) -> None:
        self._policy = policy
        self._resolver = resolver
        self._inner = inner or httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore2's signature)
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        try:
            addresses = await allowed_addresses(host, port, self._policy, self._resolver)
        except AddressNotAllowed as refused:
            notes = _notes.get()
            if notes is not None:
                notes.refused = refused
            raise
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as error:
                failure = error
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore2's signature)
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise AddressNotAllowed("Tool servers are reached over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, cap: int) -> None:
        self._inner = inner
        self._cap = cap

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._cap:
                notes = _notes.get()
                if notes is not None:
                    notes.too_large = self._cap
                raise ResponseTooLarge(self._cap)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class GuardedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport over a `GuardedBackend`, its response bodies capped at `max_bytes`."""

    def __init__(self, backend: GuardedBackend, *, max_bytes: int) -> None:
        super().__init__(trust_env=False)
        # httpx2's transport takes no network backend: its pool is replaced by one that has it.
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(trust_env=False),
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
            network_backend=backend,
        )
        self._max_bytes = max_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = "identity"
        response = await super().handle_async_request(request)
        notes = _notes.get()
        if response.headers.get("content-encoding", "identity").strip().lower() != "identity":
            await response.aclose()
            if notes is not None:
                notes.compressed = True
            raise CompressedResponse
        if notes is not None:
            if response.status_code >= 400:
                notes.status = response.status_code
            elif 300 <= response.status_code < 400:
                notes.redirected = True
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _CappedStream(response.stream, self._max_bytes)
        return response


def explain(error: BaseException, notes: Notes, timeout: float) -> ToolServerUnreachable:
    """The member's message for a failed operation: what the notes say first, then the most
    telling of the errors (an exception group's are looked through); never a header value."""
    if notes.refused is not None:
        return notes.refused
    if notes.too_large is not None:
        return ResponseTooLarge(notes.too_large)
    if notes.compressed:
        return CompressedResponse()
    leaves = list(_leaves(error))
    for leaf in leaves:
        if isinstance(leaf, ToolServerUnreachable):
            return leaf
    for leaf in leaves:
        if isinstance(leaf, TimeoutError | httpx2.TimeoutException):
            return ToolServerUnreachable(f"The tool server did not answer within {timeout:g} s")
    for leaf in leaves:
        if isinstance(leaf, httpx2.ConnectError):
            return ToolServerUnreachable("Could not connect to the tool server")
    status = f"HTTP {notes.status}" if notes.status is not None else None
    for leaf in leaves:
        if isinstance(leaf, httpx2.TransportError):
            return ToolServerUnreachable("The connection to the tool server broke off")
        if isinstance(leaf, MCPError) and leaf.code == PARSE_ERROR:
            return ToolServerUnreachable("The tool server's answer is not valid MCP")
        if isinstance(leaf, MCPError):
            said = _preview(str(getattr(leaf, "message", "")))
            if status is not None:
                return ToolServerUnreachable(f"The tool server answered {status} ({said})")
            if notes.redirected:
                return ToolServerUnreachable(
                    "The tool server redirected to another address; redirects to another "
                    "host are not followed"
                )
            return ToolServerUnreachable(f"The tool server answered an error: {said}")
        if isinstance(leaf, ValidationError | ValueError):
            return ToolServerUnreachable("The tool server's answer is not valid MCP")
    if status is not None:
        return ToolServerUnreachable(f"The tool server answered {status}")
    kind = type(leaves[0]).__name__ if leaves else type(error).__name__
    return ToolServerUnreachable(f"The tool server could not be asked ({kind})")


def _leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error


def _preview(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 3] + "..."
