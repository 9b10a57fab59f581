from __future__ import annotations

from dataclasses import dataclass

from application.ports.clock import Clock
from application.ports.secret_box import SecretBox
from application.ports.tool_connector import ToolConnector
from application.tool_discovery import (
    ToolServerSessions,
    audit_details,
    audit_entry,
    discover_sealed,
)
from domain.agents import require_agent_manager
from domain.errors import NotFound
from domain.identity import Caller
from domain.tool_server_fields import (
    TOOL_SERVER_REFRESHED,
    parse_tool_server_id,
)
from domain.tool_servers import TOOL_SERVER_NOT_FOUND, ToolServer


@dataclass(frozen=True, slots=True, kw_only=True)
class RefreshToolServerCommand:
    caller: Caller
    server_id: int

    @classmethod
    def parse(cls, *, caller: Caller, tool_server_id: object) -> RefreshToolServerCommand:
        """An agent manager's request (403 otherwise) for a well-formed id (400)."""
        require_agent_manager(caller)
        return cls(caller=caller, server_id=parse_tool_server_id(tool_server_id))


class RefreshToolServer:
    """Ask a tool server of the caller's organization for its tools again and store them.

    Rules: only an agent manager may (403 otherwise); a missing or foreign server is 404 "Tool
    server not found", also when it is deleted while it is asked. The server is asked with no
    database connection held (short units of work before and after). A server that cannot be
    reached (its address no longer allowed included), times out or answers nonsense gives status
    `error` with the reason, and keeps the tools found before; so do header values no configured
    key opens any more. The refresh is written to the audit log.
    """

    def __init__(
        self,
        sessions: ToolServerSessions,
        connector: ToolConnector,
        box: SecretBox,
        clock: Clock,
    ) -> None:
        self._sessions = sessions
        self._connector = connector
        self._box = box
        self._clock = clock

    async def execute(self, command: RefreshToolServerCommand) -> ToolServer:
        caller = command.caller
        require_agent_manager(caller)
        async with self._sessions(caller) as session:
            server = await session.servers.get(caller.org_id, command.server_id)
            if server is None:
                raise NotFound(TOOL_SERVER_NOT_FOUND)
            sealed = await session.servers.sealed_headers(caller.org_id, server.id)
        found = await discover_sealed(
            self._connector, self._box, self._clock, kind=server.kind, url=server.url, sealed=sealed
        )
        async with self._sessions(caller) as session:
            server = await session.servers.record_discovery(caller.org_id, server.id, found)
            details = audit_details(server, error=server.error)
            await session.audit.record(
                audit_entry(caller, TOOL_SERVER_REFRESHED, server.id, details)
            )
            await session.uow.commit()
        return server
