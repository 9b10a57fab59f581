"""What the tool server use cases share: their short units of work (`ToolServerSessions`),
sealing and opening header values, the address check on a change, one discovery of a server's
tools as a `Discovery` to store, and their audit entries."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from application.ports.audit_log import AuditLog
from application.ports.clock import Clock
from application.ports.secret_box import SecretBox
from application.ports.tool_connector import (
    AddressNotAllowed,
    ToolConnector,
    ToolEndpoint,
    ToolServerUnreachable,
)
from application.ports.tool_server_repository import Discovery, ToolServerRepository
from application.ports.unit_of_work import UnitOfWork
from domain.audit import NewAuditEntry
from domain.errors import Invalid, field_error
from domain.identity import Caller
from domain.tool_server_fields import HEADERS_UNREADABLE
from domain.tool_servers import (
    ADDRESS_NOT_ALLOWED,
    MAX_TOOLS_PER_SERVER,
    ToolServer,
    ToolServerKind,
)

AUDIT_TARGET = "tool_server"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolServerSession:
    """What tool servers' use cases and tools read and write in one short unit of work of the
    caller's organization, so that none holds a database connection while a tool server
    answers (a call or a discovery may take the whole `AP_TOOL_TIMEOUT`)."""

    servers: ToolServerRepository
    audit: AuditLog
    uow: UnitOfWork


ToolServerSessions = Callable[[Caller], AbstractAsyncContextManager[ToolServerSession]]
"""Opens a `ToolServerSession` acting for a member (the wiring's short scope)."""


def seal_headers(box: SecretBox, headers: Mapping[str, str]) -> bytes | None:
    """The header values sealed as one JSON object, or None when there are none."""
    if not headers:
        return None
    return box.seal(json.dumps(dict(headers), ensure_ascii=False).encode())


def open_headers(box: SecretBox, sealed: bytes | None) -> dict[str, str]:
    """The header values `seal_headers` sealed; `ValueError` when no configured key opens
    them or they are not the object sealed."""
    if sealed is None:
        return {}
    headers = json.loads(box.open(sealed))
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise ValueError("sealed headers are not an object of strings")
    return headers


async def check_address(connector: ToolConnector, url: str) -> None:
    """400 "Tool server address is not allowed" (its reason in `details`) unless the connector
    allows `url`'s host. A host that does not resolve (now) is not refused: the discovery that
    follows fails and records why, as for any server that cannot be reached."""
    try:
        await connector.check_address(url)
    except AddressNotAllowed as refused:
        raise Invalid(ADDRESS_NOT_ALLOWED, [field_error("url", refused.message)]) from None
    except ToolServerUnreachable:
        return


async def discover(
    connector: ToolConnector,
    clock: Clock,
    *,
    kind: ToolServerKind,
    url: str,
    headers: Mapping[str, str],
) -> Discovery:
    """The server's tools (the first `MAX_TOOLS_PER_SERVER`), or the member-readable reason
    it could not be asked; never raises for the server's own failures."""
    endpoint = ToolEndpoint(kind=kind, url=url, headers=dict(headers))
    try:
        tools = await connector.discover(endpoint)
    except ToolServerUnreachable as failure:
        return Discovery(tools=None, error=failure.message, at=clock.now())
    return Discovery(tools=list(tools)[:MAX_TOOLS_PER_SERVER], error=None, at=clock.now())


async def discover_sealed(
    connector: ToolConnector,
    box: SecretBox,
    clock: Clock,
    *,
    kind: ToolServerKind,
    url: str,
    sealed: bytes | None,
) -> Discovery:
    """`discover` with the header values as stored; values no configured key opens give an
    error discovery (`HEADERS_UNREADABLE`) and the server is not asked."""
    try:
        headers = open_headers(box, sealed)
    except ValueError:
        return Discovery(tools=None, error=HEADERS_UNREADABLE, at=clock.now())
    return await discover(connector, clock, kind=kind, url=url, headers=headers)


def audit_entry(
    caller: Caller, action: str, server_id: int, details: dict[str, object]
) -> NewAuditEntry:
    """The audit log's entry of a change `caller` made to a tool server."""
    return NewAuditEntry(
        org_id=caller.org_id,
        actor_user_id=caller.user_id,
        action=action,
        target_type=AUDIT_TARGET,
        target_id=str(server_id),
        details=details,
    )


def audit_details(server: ToolServer, **more: object) -> dict[str, object]:
    """What the audit log keeps of a server: never a header value, only the names."""
    return {
        "name": server.name,
        "kind": server.kind,
        "url": server.url,
        "headerNames": list(server.header_names),
        "enabled": server.enabled,
        "status": server.status,
        "toolCount": len(server.tools),
        **more,
    }
