from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from application.ports.clock import Clock
from application.ports.secret_box import SecretBox
from application.ports.tool_connector import ToolConnector
from application.ports.tool_server_repository import Discovery, NewToolServer
from application.tool_discovery import (
    ToolServerSession,
    ToolServerSessions,
    audit_details,
    audit_entry,
    check_address,
    discover,
    discover_sealed,
    seal_headers,
)
from domain.agents import require_agent_manager
from domain.errors import Conflict, Invalid, NotFound, field_error
from domain.identity import Caller
from domain.tool_server_fields import (
    TOOL_SERVER_UPDATED,
    ToolServerChanges,
    parse_tool_server_id,
)
from domain.tool_servers import (
    HEADERS_FOR_NEW_HOST,
    TOOL_SERVER_CHANGED,
    TOOL_SERVER_NAME_TAKEN,
    TOOL_SERVER_NOT_FOUND,
    ToolServer,
)
from domain.values import sent_values

_WIRE_NAMES = {"require_approval": "requireApproval"}


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateToolServerCommand:
    caller: Caller
    server_id: int
    changes: ToolServerChanges

    @classmethod
    def parse(
        cls, *, caller: Caller, tool_server_id: object, **fields: object
    ) -> UpdateToolServerCommand:
        """Who, then what: only an agent manager's request is read (403 otherwise); the id
        (400 "Valid tool server ID is required"), then the fields sent
        (`ToolServerChanges.parse`)."""
        require_agent_manager(caller)
        return cls(
            caller=caller,
            server_id=parse_tool_server_id(tool_server_id),
            changes=ToolServerChanges.parse(**fields),
        )


class UpdateToolServer:
    """Change the fields of a tool server the caller sent; fields not sent stay as they are.

    Rules: only an agent manager may (403 otherwise); a missing or foreign server is 404 "Tool
    server not found". The fields follow the rules of creation. `headers`, when sent, replaces
    every header value (null or `{}` removes them all). When the URL, the kind or the headers
    change, the new address must be allowed (400 "Tool server address is not allowed", nothing
    changed) and the server is asked for its tools again before anything is written, with the
    outcome of a refresh (status `error` and the reason when it cannot be reached, the tools
    found before kept); no database connection is held while it is asked, and a change made by
    someone else meanwhile is 409 "The tool server was changed meanwhile; send the change
    again" (nothing written). A name another server of the organization uses is 409. The change is
    written to the audit log with the names of the fields sent, never a header value.
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

    async def execute(self, command: UpdateToolServerCommand) -> ToolServer:
        caller = command.caller
        org_id = caller.org_id
        require_agent_manager(caller)
        values = sent_values(command.changes)
        async with self._sessions(caller) as session:
            current = await session.servers.get(org_id, command.server_id)
            if current is None:
                raise NotFound(TOOL_SERVER_NOT_FOUND)
            name = values.get("name", current.name)
            kind = values.get("kind", current.kind)
            url = values.get("url", current.url)
            headers_sent = "headers" in values
            reconnect = headers_sent or kind != current.kind or url != current.url
            if current.header_names and not headers_sent and _origin(url) != _origin(current.url):
                # The header values are credentials for the old host: a manager moving the
                # server elsewhere must give them again, or they would go to a host of his
                # choosing.
                problem = [field_error("headers", HEADERS_FOR_NEW_HOST)]
                raise Invalid(HEADERS_FOR_NEW_HOST, problem)
            if name != current.name and any(
                s.name == name and s.id != current.id for s in await session.servers.list(org_id)
            ):
                raise Conflict(TOOL_SERVER_NAME_TAKEN)
            if headers_sent:
                sealed = seal_headers(self._box, values["headers"])
                header_names = tuple(values["headers"])
            else:
                sealed = await session.servers.sealed_headers(org_id, current.id)
                header_names = current.header_names
            new = NewToolServer(
                name=name,
                kind=kind,
                url=url,
                description=values.get("description", current.description),
                header_names=header_names,
                sealed_headers=sealed,
                require_approval=values.get("require_approval", current.require_approval),
                enabled=values.get("enabled", current.enabled),
            )
            if not reconnect:
                return await _store(session, caller, current.id, new, None, list(values))
        await check_address(self._connector, url)
        if headers_sent:
            found = await discover(
                self._connector, self._clock, kind=kind, url=url, headers=values["headers"]
            )
        else:
            found = await discover_sealed(
                self._connector, self._box, self._clock, kind=kind, url=url, sealed=sealed
            )
        async with self._sessions(caller) as session:
            latest = await session.servers.get(org_id, current.id)
            if latest is None:
                raise NotFound(TOOL_SERVER_NOT_FOUND)
            if latest.updated_at != current.updated_at:
                raise Conflict(TOOL_SERVER_CHANGED)
            return await _store(session, caller, current.id, new, found, list(values))


async def _store(
    session: ToolServerSession,
    caller: Caller,
    server_id: int,
    new: NewToolServer,
    found: Discovery | None,
    sent: list[str],
) -> ToolServer:
    """Write the change (and the discovery made for it), audited, and commit."""
    org_id = caller.org_id
    server = await session.servers.replace(org_id, server_id, new)
    if found is not None:
        server = await session.servers.record_discovery(org_id, server.id, found)
    details = audit_details(server, changed=[_WIRE_NAMES.get(n, n) for n in sent])
    await session.audit.record(audit_entry(caller, TOOL_SERVER_UPDATED, server.id, details))
    await session.uow.commit()
    return server


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port
