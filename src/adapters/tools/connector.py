"""`ToolConnector` over HTTP: MCP servers (Streamable HTTP) and OpenAPI-described APIs."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio
import httpcore2
import httpx2

from adapters.tools import mcp_client, openapi
from adapters.tools.addresses import AddressPolicy, Resolver, check_url, system_resolver
from adapters.tools.transport import GuardedBackend, GuardedTransport, explain, noting
from application.ports.tool_connector import ToolEndpoint, ToolOutput, ToolServerUnreachable
from domain.tool_servers import ToolDefinition

T = TypeVar("T")

DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
DOCUMENT_TTL = 60.0
"""Seconds an OpenAPI document's operations are reused for calls before it is read again."""
DESCRIPTION_CHARS = 2048
SCHEMA_CHARS = 32_000
"""What a server's tool may hold as stored (`_bounded_tool`)."""
PARSING_THREADS = 2
_DOCUMENTS_KEPT = 256


class HttpToolConnector:
    """Discovers and calls the tools of MCP servers and OpenAPI-described HTTP APIs.

    Every request goes through one guarded HTTP client (`adapters.tools.transport`): each
    connection checks its host's resolved addresses against the deployment's `allowed_hosts`
    and connects to a checked address; no redirect is followed; bodies are capped at
    `max_response_bytes`; each discovery or call has `timeout` seconds in all. Connections are
    pooled across calls; the MCP sessions are not (one per discovery or call).
    """

    def __init__(
        self,
        allowed_hosts: Iterable[str] = (),
        timeout: float = 30.0,
        *,
        resolver: Resolver | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        network_backend: httpcore2.AsyncNetworkBackend | None = None,
    ) -> None:
        self._policy = AddressPolicy(allowed_hosts)
        self._resolver = resolver or system_resolver
        self._timeout = timeout
        self._max_bytes = max_response_bytes
        backend = GuardedBackend(self._policy, self._resolver, network_backend)
        self._transport = GuardedTransport(backend, max_bytes=max_response_bytes)
        self._documents: dict[tuple[str, str], tuple[float, list[openapi.Operation]]] = {}
        self._parsing: anyio.CapacityLimiter | None = None

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self._transport.aclose()

    async def check_address(self, url: str) -> None:
        await self._bounded(lambda: check_url(url, self._policy, self._resolver))

    async def discover(self, endpoint: ToolEndpoint) -> list[ToolDefinition]:
        if endpoint.kind == "mcp":
            tools = await self._bounded(
                lambda: mcp_client.discover_tools(
                    self._client(endpoint.headers), endpoint.url, max_bytes=self._max_bytes
                )
            )
        else:
            found = await self._bounded(lambda: self._operations(endpoint, fresh=True))
            tools = [operation.tool for operation in found]
        return [_bounded_tool(tool) for tool in tools]

    async def call(
        self, endpoint: ToolEndpoint, tool: ToolDefinition, arguments: dict[str, Any]
    ) -> ToolOutput:
        if endpoint.kind == "mcp":
            return await self._bounded(
                lambda: mcp_client.call_tool(
                    self._client(endpoint.headers),
                    endpoint.url,
                    tool.name,
                    arguments,
                    max_bytes=self._max_bytes,
                )
            )
        return await self._bounded(lambda: self._call_operation(endpoint, tool.name, arguments))

    def _client(self, headers: Mapping[str, str]) -> httpx2.AsyncClient:
        # A client per request's headers over the shared transport (and its pool); it is not
        # closed, as closing it would close the transport.
        return httpx2.AsyncClient(
            transport=self._transport,
            headers=dict(headers),
            timeout=httpx2.Timeout(self._timeout),
            follow_redirects=False,
            trust_env=False,
        )

    async def _bounded(self, operation: Callable[[], Awaitable[T]]) -> T:
        with noting() as notes:
            try:
                with anyio.fail_after(self._timeout):
                    return await operation()
            except Exception as error:
                raise explain(error, notes, self._timeout) from None

    def _parsing_limiter(self) -> anyio.CapacityLimiter:
        if self._parsing is None:
            self._parsing = anyio.CapacityLimiter(PARSING_THREADS)
        return self._parsing

    async def _operations(self, endpoint: ToolEndpoint, *, fresh: bool) -> list[openapi.Operation]:
        key = (endpoint.url, _fingerprint(endpoint.headers))
        now = time.monotonic()
        cached = self._documents.get(key)
        if cached is not None and not fresh and now - cached[0] < DOCUMENT_TTL:
            return cached[1]
        client = self._client(endpoint.headers)
        response = await client.get(
            endpoint.url, headers={"Accept": "application/json, application/yaml;q=0.9, */*;q=0.5"}
        )
        if response.status_code != 200:
            note = "; redirects are not followed" if 300 <= response.status_code < 400 else ""
            raise ToolServerUnreachable(
                f"The OpenAPI document's URL answered HTTP {response.status_code}{note}"
            )
        body = response.content

        def parse() -> list[openapi.Operation]:
            return openapi.operations(openapi.parse_document(body, endpoint.url), endpoint.url)

        # Validating a large document takes a while: not on the event loop, and on threads of
        # its own, so that a parse abandoned at the timeout holds none of the app's.
        found = await anyio.to_thread.run_sync(
            parse, abandon_on_cancel=True, limiter=self._parsing_limiter()
        )
        if endpoint.headers:
            _check_origins(found, endpoint.url)
        if len(self._documents) >= _DOCUMENTS_KEPT:
            self._documents.clear()
        self._documents[key] = (now, found)
        return found

    async def _call_operation(
        self, endpoint: ToolEndpoint, name: str, arguments: dict[str, Any]
    ) -> ToolOutput:
        found = {op.tool.name: op for op in await self._operations(endpoint, fresh=False)}
        operation = found.get(name)
        if operation is None:
            raise ToolServerUnreachable(f"The API no longer offers the operation {name[:64]!r}")
        try:
            request = openapi.build_request(operation, arguments)
        except openapi.BadArguments as error:
            return ToolOutput(content=[{"type": "text", "text": str(error)}], is_error=True)
        client = self._client(endpoint.headers)
        # The configured headers win over the model's, whatever their case.
        configured = {name.lower() for name in endpoint.headers}
        headers = {n: v for n, v in request.headers.items() if n.lower() not in configured}
        headers.update(endpoint.headers)
        sent = client.build_request(
            request.method,
            request.url,
            params=request.params,
            headers=headers,
            json=request.json_body if request.has_body else None,
        )
        response = await client.send(sent)
        return openapi.response_output(
            response.status_code, response.headers.get("content-type", ""), response.content
        )


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{(parts.hostname or '').lower()}:{parts.port or ''}"


def _check_origins(found: Iterable[openapi.Operation], document_url: str) -> None:
    """The configured headers are credentials for the host an administrator registered: an
    API whose document sends its calls to another host (`servers`) does not get them."""
    home = _origin(document_url)
    for operation in found:
        if _origin(operation.base_url) != home:
            raise ToolServerUnreachable(
                f"The API's server ({urlsplit(operation.base_url).netloc}) is not on the "
                "document's host; a tool server's headers are sent only to the host of its URL"
            )


def _bounded_tool(tool: ToolDefinition) -> ToolDefinition:
    """The tool with a description of at most `DESCRIPTION_CHARS` and an input schema of at
    most `SCHEMA_CHARS` as JSON (else an open object schema): what a server describes is
    stored, listed and sent to models with every answer, so its size is the platform's."""
    schema = tool.input_schema
    if len(json.dumps(schema, ensure_ascii=False)) > SCHEMA_CHARS:
        schema = {"type": "object", "description": "(the server's schema is too large to show)"}
    return ToolDefinition(
        name=tool.name, description=tool.description[:DESCRIPTION_CHARS], input_schema=schema
    )


def _fingerprint(headers: Mapping[str, str]) -> str:
    """The headers as a cache key that holds no secret."""
    digest = hashlib.sha256()
    for name, value in sorted(headers.items()):
        digest.update(f"{name.lower()}\0{value}\0".encode())
    return digest.hexdigest()
