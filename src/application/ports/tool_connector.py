from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from domain.tool_servers import ToolDefinition, ToolServerKind


class ToolServerUnreachable(Exception):
    """A tool server could not be asked: its address is not allowed, it did not answer in
    time, or it answered nonsense. `message` is human-readable, holds no secret (no header
    value), and is what the member sees (a server's `error`, a call's `tool-output-error`)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class AddressNotAllowed(ToolServerUnreachable):
    """The server's URL is not http(s), or its host resolves to a loopback, private,
    link-local, multicast or otherwise reserved address that the deployment does not allow
    (`AP_TOOL_ALLOWED_HOSTS`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolEndpoint:
    """Where and how to reach one tool server: its kind, URL and the header values (secrets,
    decrypted for this connection only) sent with every request."""

    kind: ToolServerKind
    url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutput:
    """What one call returned: its content as UI-message-ready parts (`{"type": "text",
    "text"}`, `{"type": "image", "mediaType", "url"}` with a data URL, a resource as its
    text), whether the server marked it an error, and its structured content if any."""

    content: list[dict[str, Any]]
    is_error: bool = False
    structured: Any = None


class ToolConnector(Protocol):
    """Talks to tool servers: discovers their tools and calls them.

    Every connection checks the address after DNS resolution, follows no redirect to another
    host, bounds the response's size and has a timeout; each failure raises
    `ToolServerUnreachable` (`AddressNotAllowed` for the address) with a message for the
    member, never a secret.
    """

    async def check_address(self, url: str) -> None:
        """Raise `AddressNotAllowed` unless `url` is http(s) and its host resolves only to
        addresses the deployment allows; makes no request."""
        ...

    async def discover(self, endpoint: ToolEndpoint) -> list[ToolDefinition]:
        """The server's tools: MCP `initialize` then every page of `tools/list`; OpenAPI, one
        tool per operation with an `operationId` of the document at the URL, its parameters
        and JSON body as the input schema."""
        ...

    async def call(
        self, endpoint: ToolEndpoint, tool: ToolDefinition, arguments: dict[str, Any]
    ) -> ToolOutput:
        """Call `tool` with the model's `arguments`; a failing server or tool raises
        `ToolServerUnreachable`, a tool that answers with an error returns `is_error`."""
        ...
