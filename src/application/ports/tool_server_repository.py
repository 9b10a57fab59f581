from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from domain.tool_servers import Approval, ToolDefinition, ToolServer, ToolServerKind


@dataclass(frozen=True, slots=True, kw_only=True)
class NewToolServer:
    """A tool server as created: its fields, the names of its headers and their values sealed
    (`SecretBox.seal` of their JSON object), or None when it has no headers."""

    name: str
    kind: ToolServerKind
    url: str
    description: str
    header_names: tuple[str, ...]
    sealed_headers: bytes | None
    require_approval: Approval
    enabled: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Discovery:
    """What one refresh found: the tools, or the error that stopped it (then the tools found
    before are kept), and when."""

    tools: Sequence[ToolDefinition] | None
    error: str | None
    at: datetime


class ToolServerRepository(Protocol):
    """The tool servers of one organization.

    Every method takes the organization id and never reads or changes another organization's
    rows. Writes become durable when the unit of work commits.
    """

    async def add(self, org_id: str, user_id: str, server: NewToolServer) -> ToolServer:
        """Insert a server (status `error`, "Not refreshed yet", until its first discovery);
        `Conflict` (`TOOL_SERVER_NAME_TAKEN`) when the organization has one of that name."""
        ...

    async def get(self, org_id: str, server_id: int) -> ToolServer | None:
        """The server, or None."""
        ...

    async def list(
        self, org_id: str, server_ids: Sequence[int] | None = None, *, lock: bool = False
    ) -> list[ToolServer]:
        """The organization's servers by name; only those of `server_ids` when given. With
        `lock`, those read cannot be deleted until the unit of work ends (an agent granted
        them is written before a deletion takes them off every agent)."""
        ...

    async def sealed_headers(self, org_id: str, server_id: int) -> bytes | None:
        """The server's sealed header values, or None when it has none."""
        ...

    async def replace(self, org_id: str, server_id: int, server: NewToolServer) -> ToolServer:
        """Replace every field of an existing server; `Conflict` on a name clash."""
        ...

    async def record_discovery(self, org_id: str, server_id: int, found: Discovery) -> ToolServer:
        """Store a refresh's outcome: with tools, status `ready` and no error; with an error,
        status `error` and that message."""
        ...

    async def delete(self, org_id: str, server_id: int) -> bool:
        """Delete the server and remove it from every agent's tools; False when there is
        none."""
        ...
