from __future__ import annotations

from dataclasses import dataclass

from application.ports.audit_log import AuditLog
from application.ports.tool_server_repository import ToolServerRepository
from application.ports.unit_of_work import UnitOfWork
from application.tool_discovery import audit_entry
from domain.agents import require_agent_manager
from domain.errors import NotFound
from domain.identity import Caller
from domain.tool_server_fields import TOOL_SERVER_DELETED, parse_tool_server_id
from domain.tool_servers import TOOL_SERVER_NOT_FOUND


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteToolServerCommand:
    caller: Caller
    server_id: int

    @classmethod
    def parse(cls, *, caller: Caller, tool_server_id: object) -> DeleteToolServerCommand:
        """An agent manager's request (403 otherwise) for a well-formed id (400)."""
        require_agent_manager(caller)
        return cls(caller=caller, server_id=parse_tool_server_id(tool_server_id))


class DeleteToolServer:
    """Delete a tool server of the caller's organization.

    Rules: only an agent manager may (403 otherwise); a missing or foreign server is 404 "Tool
    server not found". Every agent that used it loses it, in the same transaction, and the
    deletion is written to the audit log there too. Its sealed header values go with its row.
    """

    def __init__(self, servers: ToolServerRepository, audit: AuditLog, uow: UnitOfWork) -> None:
        self._servers = servers
        self._audit = audit
        self._uow = uow

    async def execute(self, command: DeleteToolServerCommand) -> None:
        caller = command.caller
        require_agent_manager(caller)
        server = await self._servers.get(caller.org_id, command.server_id)
        if server is None or not await self._servers.delete(caller.org_id, command.server_id):
            raise NotFound(TOOL_SERVER_NOT_FOUND)
        details: dict[str, object] = {"name": server.name, "url": server.url}
        await self._audit.record(audit_entry(caller, TOOL_SERVER_DELETED, server.id, details))
        await self._uow.commit()
