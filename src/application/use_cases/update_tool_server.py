from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from application.ports.audit_log import AuditLog
from application.ports.clock import Clock
from application.ports.secret_box import SecretBox
from application.ports.tool_connector import ToolConnector
from application.ports.tool_server_repository import (
    Discovery,
    NewToolServer,
    ToolServerRepository,
)
from application.ports.unit_of_work import UnitOfWork
from application.tool_discovery import (
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
    found before kept). A name another server of the organization uses is 409. The change is
    written to the audit log with the names of the fields sent, never a header value.
    """

    def __init__(
        self,
        servers: ToolServerRepository,
        connector: ToolConnector,
        box: SecretBox,
        audit: AuditLog,
        clock: Clock,
        uow: UnitOfWork,
    ) -> None:
        self._servers = servers
        self._connector = connector
        self._box = box
        self._audit = audit
        self._clock = clock
        self._uow = uow

    async def execute(self, command: UpdateToolServerCommand) -> ToolServer:
        caller = command.caller
        org_id = caller.org_id
        require_agent_manager(caller)
        current = await self._servers.get(org_id, command.server_id)
        if current is None:
            raise NotFound(TOOL_SERVER_NOT_FOUND)
        values = sent_values(command.changes)
        name = values.get("name", current.name)
        kind = values.get("kind", current.kind)
        url = values.get("url", current.url)
        headers_sent = "headers" in values
        reconnect = headers_sent or kind != current.kind or url != current.url
        if current.header_names and not headers_sent and _origin(url) != _origin(current.url):
            # The header values are credentials for the old host: a manager moving the server
            # elsewhere must give them again, or they would go to a host of his choosing.
            raise Invalid(HEADERS_FOR_NEW_HOST, [field_error("headers", HEADERS_FOR_NEW_HOST)])
        if reconnect:
            await check_address(self._connector, url)
        if name != current.name and any(
            s.name == name and s.id != current.id for s in await self._servers.list(org_id)
        ):
            raise Conflict(TOOL_SERVER_NAME_TAKEN)
        if headers_sent:
            headers = values["headers"]
            sealed = seal_headers(self._box, headers)
            header_names = tuple(headers)
        else:
            sealed = await self._servers.sealed_headers(org_id, current.id)
            header_names = current.header_names
        found: Discovery | None = None
        if reconnect and headers_sent:
            found = await discover(
                self._connector, self._clock, kind=kind, url=url, headers=headers
            )
        elif reconnect:
            found = await discover_sealed(
                self._connector, self._box, self._clock, kind=kind, url=url, sealed=sealed
            )
        server = await self._servers.replace(
            org_id,
            current.id,
            NewToolServer(
                name=name,
                kind=kind,
                url=url,
                description=values.get("description", current.description),
                header_names=header_names,
                sealed_headers=sealed,
                require_approval=values.get("require_approval", current.require_approval),
                enabled=values.get("enabled", current.enabled),
            ),
        )
        if found is not None:
            server = await self._servers.record_discovery(org_id, server.id, found)
        changed = [_WIRE_NAMES.get(n, n) for n in values]
        details = audit_details(server, changed=changed)
        await self._audit.record(audit_entry(caller, TOOL_SERVER_UPDATED, server.id, details))
        await self._uow.commit()
        return server


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port
