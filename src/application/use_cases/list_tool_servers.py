from __future__ import annotations

from dataclasses import dataclass

from application.ports.tool_server_repository import ToolServerRepository
from domain.errors import NotFound
from domain.identity import Caller
from domain.tool_server_fields import parse_tool_server_id
from domain.tool_servers import TOOL_SERVER_NOT_FOUND, ToolServer


@dataclass(frozen=True, slots=True, kw_only=True)
class ListToolServersQuery:
    caller: Caller
    server_id: int | None = None

    @classmethod
    def parse(cls, *, caller: Caller, tool_server_id: object = None) -> ListToolServersQuery:
        """Every server, or the one of a well-formed id (400 "Valid tool server ID is
        required")."""
        server_id = None if tool_server_id is None else parse_tool_server_id(tool_server_id)
        return cls(caller=caller, server_id=server_id)


class ListToolServers:
    """The tool servers of the caller's organization, by name, or the one asked for.

    Rules: every member may read them (their agents use them). One asked for that is missing
    or belongs to another organization is 404 "Tool server not found". Header values are
    never part of a server as read: only their names.
    """

    def __init__(self, servers: ToolServerRepository) -> None:
        self._servers = servers

    async def execute(self, query: ListToolServersQuery) -> list[ToolServer]:
        org_id = query.caller.org_id
        if query.server_id is None:
            return await self._servers.list(org_id)
        server = await self._servers.get(org_id, query.server_id)
        if server is None:
            raise NotFound(TOOL_SERVER_NOT_FOUND)
        return [server]
