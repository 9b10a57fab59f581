"""`ToolServerRepository` on an organization-scoped asyncpg connection.

As in `skills.py`: fixed statements, every one filtering by `org_id` (row-level security is the
second wall), rows read by position. `require_approval` and `tools` are jsonb, bound as JSON
text (the connection's codec takes a str as JSON already). A server's header values are only
ever read sealed, by `sealed_headers`; no other statement returns them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import asyncpg

from adapters.postgres.database import OrgConnection
from application.ports.tool_server_repository import Discovery, NewToolServer
from domain.errors import Conflict, NotFound
from domain.tool_servers import (
    TOOL_SERVER_NAME_TAKEN,
    TOOL_SERVER_NOT_FOUND,
    Approval,
    ToolDefinition,
    ToolServer,
)

NAME_INDEX = "ux_tool_servers_org_name"
NOT_REFRESHED = "Not refreshed yet"
# The statements below are composed from module constants only (S608): every value is bound.
COLUMNS = (
    "t.id, t.org_id, t.user_id, t.name, t.kind, t.url, t.description, t.header_names, "
    "t.require_approval, t.enabled, t.status, t.error, t.tools, t.refreshed_at, t.created_at, "
    "t.updated_at"
)
GET = f"SELECT {COLUMNS} FROM tool_servers t WHERE t.org_id = $1 AND t.id = $2"
LIST = f"""
    SELECT {COLUMNS} FROM tool_servers t
    WHERE t.org_id = $1 AND ($2::bigint[] IS NULL OR t.id = ANY($2::bigint[]))
    ORDER BY t.name"""
LIST_LOCKED = f"{LIST} FOR KEY SHARE OF t"
SEALED = "SELECT t.sealed_headers FROM tool_servers t WHERE t.org_id = $1 AND t.id = $2"
INSERT = f"""
    INSERT INTO tool_servers AS t (org_id, user_id, name, kind, url, description, header_names,
        sealed_headers, require_approval, enabled, status, error)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'error', '{NOT_REFRESHED}')
    ON CONFLICT (org_id, name) DO NOTHING
    RETURNING {COLUMNS}"""
REPLACE = f"""
    UPDATE tool_servers t SET name = $3, kind = $4, url = $5, description = $6,
        header_names = $7, sealed_headers = $8, require_approval = $9, enabled = $10,
        updated_at = now()
    WHERE t.org_id = $1 AND t.id = $2
    RETURNING {COLUMNS}"""
RECORD_DISCOVERY = f"""
    UPDATE tool_servers t SET
        status = CASE WHEN $3::text IS NULL THEN 'ready' ELSE 'error' END, error = $3,
        tools = coalesce($4::jsonb, t.tools), refreshed_at = $5, updated_at = now()
    WHERE t.org_id = $1 AND t.id = $2
    RETURNING {COLUMNS}"""
DELETE = "DELETE FROM tool_servers t WHERE t.org_id = $1 AND t.id = $2 RETURNING t.id"
# An agent's grants are `[{toolServerId, names}]`; the deleted server's leaves every list.
UNGRANT = """
    UPDATE agents a SET tools = (
        SELECT coalesce(jsonb_agg(g.grant_ ORDER BY g.ord), '[]'::jsonb)
        FROM jsonb_array_elements(a.tools) WITH ORDINALITY AS g(grant_, ord)
        WHERE NOT g.grant_ @> jsonb_build_object('toolServerId', $2::bigint))
    WHERE a.org_id = $1 AND a.tools @> jsonb_build_array(
        jsonb_build_object('toolServerId', $2::bigint))"""


def _approval(value: Any) -> Approval:
    if value in ("never", "always"):
        return value  # type: ignore[no-any-return]
    return tuple(str(name) for name in value)


def _server(r: Any) -> ToolServer:
    tools = tuple(
        ToolDefinition(
            name=t["name"], description=t.get("description") or "", input_schema=t["inputSchema"]
        )
        for t in r[12]
    )
    return ToolServer(
        id=r[0], org_id=r[1], user_id=r[2], name=r[3], kind=r[4], url=r[5], description=r[6],
        header_names=tuple(r[7]), require_approval=_approval(r[8]), enabled=r[9], status=r[10],
        error=r[11], tools=tools, refreshed_at=r[13], created_at=r[14], updated_at=r[15],
    )  # fmt: skip


def _fields(server: NewToolServer) -> tuple[Any, ...]:
    approval = server.require_approval
    return (
        server.name, server.kind, server.url, server.description, list(server.header_names),
        server.sealed_headers,
        json.dumps(approval if isinstance(approval, str) else list(approval)), server.enabled,
    )  # fmt: skip


def _tools(tools: Sequence[ToolDefinition]) -> str:
    return json.dumps(
        [
            {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
            for t in tools
        ]
    )


class PgToolServerRepository:
    """`ToolServerRepository` in Postgres. A name clash becomes `Conflict`: on insert through
    `ON CONFLICT ... DO NOTHING`, on a rename through the unique index's violation (which ends
    the transaction, as the use case does on `Conflict`). A write to a server that is not
    there raises `NotFound`."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def add(self, org_id: str, user_id: str, server: NewToolServer) -> ToolServer:
        rows = await self._db.fetch_in_transaction(INSERT, org_id, user_id, *_fields(server))
        if not rows:
            raise Conflict(TOOL_SERVER_NAME_TAKEN)
        return _server(rows[0])

    async def get(self, org_id: str, server_id: int) -> ToolServer | None:
        rows = await self._db.fetch(GET, org_id, server_id)
        return _server(rows[0]) if rows else None

    async def list(
        self, org_id: str, server_ids: Sequence[int] | None = None, *, lock: bool = False
    ) -> list[ToolServer]:
        ids = None if server_ids is None else list(server_ids)
        if lock:
            rows = await self._db.fetch_in_transaction(LIST_LOCKED, org_id, ids)
        else:
            rows = await self._db.fetch(LIST, org_id, ids)
        return [_server(r) for r in rows]

    async def sealed_headers(self, org_id: str, server_id: int) -> bytes | None:
        rows = await self._db.fetch(SEALED, org_id, server_id)
        return bytes(rows[0][0]) if rows and rows[0][0] is not None else None

    async def replace(self, org_id: str, server_id: int, server: NewToolServer) -> ToolServer:
        try:
            rows = await self._db.fetch_in_transaction(REPLACE, org_id, server_id, *_fields(server))
        except asyncpg.UniqueViolationError as error:
            if error.constraint_name == NAME_INDEX:
                raise Conflict(TOOL_SERVER_NAME_TAKEN) from error
            raise
        if not rows:
            raise NotFound(TOOL_SERVER_NOT_FOUND)
        return _server(rows[0])

    async def record_discovery(self, org_id: str, server_id: int, found: Discovery) -> ToolServer:
        tools = None if found.tools is None else _tools(found.tools)
        error = None if found.tools is not None else (found.error or "Unknown error")
        rows = await self._db.fetch_in_transaction(
            RECORD_DISCOVERY, org_id, server_id, error, tools, found.at
        )
        if not rows:
            raise NotFound(TOOL_SERVER_NOT_FOUND)
        return _server(rows[0])

    async def delete(self, org_id: str, server_id: int) -> bool:
        if not await self._db.fetch_in_transaction(DELETE, org_id, server_id):
            return False
        await self._db.execute(UNGRANT, org_id, server_id)
        return True
