from __future__ import annotations

from dataclasses import dataclass

from application.ports.clock import Clock
from application.ports.secret_box import SecretBox
from application.ports.tool_connector import ToolConnector
from application.ports.tool_server_repository import NewToolServer
from application.tool_discovery import (
    ToolServerSessions,
    audit_details,
    audit_entry,
    check_address,
    discover,
    seal_headers,
)
from domain.agents import require_agent_manager
from domain.errors import Conflict
from domain.identity import Caller
from domain.tool_server_fields import TOOL_SERVER_CREATED, ToolServerFields
from domain.tool_servers import TOOL_SERVER_NAME_TAKEN, ToolServer


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateToolServerCommand:
    caller: Caller
    fields: ToolServerFields

    @classmethod
    def parse(cls, *, caller: Caller, **fields: object) -> CreateToolServerCommand:
        """Who, then what: only an agent manager's request is read (403 otherwise), its fields
        parsed by `ToolServerFields.parse`."""
        require_agent_manager(caller)
        return cls(caller=caller, fields=ToolServerFields.parse(**fields))


class CreateToolServer:
    """Connect the caller's organization to a tool server and record the tools it offers.

    Rules: only an agent manager (`org:admin` or `org:agents:manage`) may (403 otherwise). The
    fields follow `domain.tool_server_fields.TOOL_SERVER_FIELDS`. A URL whose host the
    deployment does not allow is 400 "Tool server address is not allowed" and nothing is stored;
    a name the organization already uses is 409. The server is then asked for its tools before
    anything is written (no transaction waits on the network): one that cannot be reached, times
    out or answers nonsense is still created, with status `error` and the reason; no database
    connection is held while it is asked (short units of work before and after, the name checked
    again by the store). Header values are stored sealed (`SecretBox`), and only their names are
    ever shown. The creation is written to the audit log (never a header value) in the same
    transaction; the creator is recorded.
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

    async def execute(self, command: CreateToolServerCommand) -> ToolServer:
        caller, fields = command.caller, command.fields
        require_agent_manager(caller)
        await check_address(self._connector, fields.url)
        async with self._sessions(caller) as session:
            if any(s.name == fields.name for s in await session.servers.list(caller.org_id)):
                raise Conflict(TOOL_SERVER_NAME_TAKEN)
        found = await discover(
            self._connector, self._clock, kind=fields.kind, url=fields.url, headers=fields.headers
        )
        new = NewToolServer(
            name=fields.name,
            kind=fields.kind,
            url=fields.url,
            description=fields.description,
            header_names=tuple(fields.headers),
            sealed_headers=seal_headers(self._box, fields.headers),
            require_approval=fields.require_approval,
            enabled=fields.enabled,
        )
        async with self._sessions(caller) as session:
            server = await session.servers.add(caller.org_id, caller.user_id, new)
            server = await session.servers.record_discovery(caller.org_id, server.id, found)
            await session.audit.record(
                audit_entry(caller, TOOL_SERVER_CREATED, server.id, audit_details(server))
            )
            await session.uow.commit()
        return server
