"""The tools of an organization's tool servers (MCP servers, OpenAPI-described HTTP APIs),
offered to the agents allowed to call them (`CONTRACT.md`, "Tools")."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from application.agent.tool_calls import TOOL_RESULT_CHARS
from application.ports.agent_tool import (
    ToolApprovalRequired,
    ToolContext,
    ToolFailed,
    ToolOffer,
)
from application.ports.chat_model import ToolSpec
from application.ports.secret_box import SecretBox
from application.ports.tool_connector import (
    ToolConnector,
    ToolEndpoint,
    ToolOutput,
    ToolServerUnreachable,
)
from application.tool_discovery import ToolServerSessions, open_headers
from application.tools.find_tools import find_tools_offer
from domain.agents import Agent
from domain.audit import NewAuditEntry
from domain.identity import Caller
from domain.tool_servers import (
    SEPARATOR,
    ToolDefinition,
    ToolGrant,
    ToolServer,
    offered_name,
)

log = logging.getLogger(__name__)

TOOL_CALLED = "tool.called"
"""The audit log's action for a call of a tool server's tool."""
TOOL_SERVER_TARGET = "tool_server"
DEFAULT_MAX_OFFERED = 20
TOOL_DESCRIPTION_CHARS = 1024
ERROR_TEXT_CHARS = 2000
NO_LONGER_AVAILABLE = "The tool server is no longer available."
HEADERS_UNREADABLE = (
    "The tool server's header values cannot be read; an administrator must set them again."
)
EMPTY_ERROR = "The tool reported an error without a message."
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
Outcome = Literal["ok", "tool_error", "unreachable", "unavailable", "failed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AllowedTool:
    """A tool an agent may call, under the name the model is offered."""

    name: str
    server: ToolServer
    tool: ToolDefinition


def allowed_tools(servers: Sequence[ToolServer], grants: Sequence[ToolGrant]) -> list[AllowedTool]:
    """The tools `grants` allow among `servers`, in the grants' order, each server's tools by
    name: only enabled servers (one in status `error` keeps the tools found before), only the
    names granted (all when None; a name the server no longer has is passed over). A tool
    whose offered name (`offered_name`) is cut to nothing after the separator, or is taken by
    a tool before it, is left out, so the same tools always win."""
    by_id = {server.id: server for server in servers}
    allowed: dict[str, AllowedTool] = {}
    for grant in grants:
        server = by_id.get(grant.tool_server_id)
        if server is None or not server.enabled:
            continue
        names = None if grant.names is None else set(grant.names)
        for tool in sorted(server.tools, key=lambda t: t.name):
            if names is not None and tool.name not in names:
                continue
            name = offered_name(server.name, tool.name)
            if not name.partition(SEPARATOR)[2] or name in allowed:
                continue
            allowed[name] = AllowedTool(name=name, server=server, tool=tool)
    return list(allowed.values())


class ServerTools:
    """The tools of the tool servers an agent's `tools` allow, each offered as
    `<server>__<tool>` with the server's description and input schema.

    The servers are read once per answer (enabled ones only). An agent allowed more tools than
    `max_offered` is offered `find_tools` instead, the tools themselves unlisted until it
    finds them (a call by exact name runs all the same). A call reads the server again (one
    deleted or disabled since is refused); a call of a tool the server's `requireApproval`
    names raises `ToolApprovalRequired` unless the member approved it. The server's header
    values are decrypted for that call only, so that a change applies to the next call, and the
    call goes through the `ToolConnector`; an
    unreachable server or a tool's error is a `ToolFailed` the answer goes on after. Every call
    is written to the audit log (`tool.called`: server, tool, agent, thread, duration,
    outcome; never the arguments).
    """

    def __init__(
        self,
        sessions: ToolServerSessions,
        secrets: SecretBox,
        connector: ToolConnector,
        *,
        max_offered: int = DEFAULT_MAX_OFFERED,
    ) -> None:
        self._sessions = sessions
        self._secrets = secrets
        self._connector = connector
        self._max_offered = max_offered

    async def offer(self, caller: Caller, agent: Agent) -> list[ToolOffer] | None:
        if not agent.tools:
            return None
        async with self._sessions(caller) as session:
            ids = [grant.tool_server_id for grant in agent.tools]
            servers = await session.servers.list(caller.org_id, ids)
        allowed = allowed_tools(servers, agent.tools)
        if not allowed:
            return None
        listed = len(allowed) <= self._max_offered
        offers = [
            ToolOffer(spec=_spec(tool), execute=partial(self._call, tool), listed=listed)
            for tool in allowed
        ]
        if listed:
            return offers
        return [find_tools_offer([offer.spec for offer in offers], self._max_offered), *offers]

    async def _call(
        self, allowed: AllowedTool, arguments: dict[str, Any], context: ToolContext
    ) -> Any:
        started = time.monotonic()
        outcome: Outcome | None = "failed"
        try:
            output = await self._run(allowed, arguments, context)
            outcome = "ok"
            return output
        except _Refused as refused:
            outcome = refused.outcome
            raise ToolFailed(refused.message) from None
        except ToolApprovalRequired:
            outcome = None
            raise
        finally:
            if outcome is not None:
                await self._record(allowed, context, outcome, time.monotonic() - started)

    async def _run(
        self, allowed: AllowedTool, arguments: dict[str, Any], context: ToolContext
    ) -> Any:
        org_id, server_id = context.caller.org_id, allowed.server.id
        sealed: bytes | None = None
        async with self._sessions(context.caller) as session:
            server = await session.servers.get(org_id, server_id)
            if server is not None and server.enabled:
                sealed = await session.servers.sealed_headers(org_id, server_id)
        if server is None or not server.enabled:
            raise _Refused("unavailable", NO_LONGER_AVAILABLE)
        tool = next((t for t in server.tools if t.name == allowed.tool.name), None)
        if tool is None:
            message = f"The tool {allowed.tool.name!r} is no longer offered by its server."
            raise _Refused("unavailable", message)
        if server.needs_approval(tool.name) and not context.approved:
            raise ToolApprovalRequired
        endpoint = ToolEndpoint(kind=server.kind, url=server.url, headers=self._headers(sealed))
        try:
            output = await self._connector.call(endpoint, tool, arguments)
        except ToolServerUnreachable as failure:
            raise _Refused("unreachable", failure.message) from None
        if output.is_error:
            raise _Refused("tool_error", _text(output)[:ERROR_TEXT_CHARS] or EMPTY_ERROR)
        return _result(output)

    def _headers(self, sealed: bytes | None) -> dict[str, str]:
        try:
            return open_headers(self._secrets, sealed)
        except ValueError:
            raise _Refused("failed", HEADERS_UNREADABLE) from None

    async def _record(
        self, allowed: AllowedTool, context: ToolContext, outcome: Outcome, seconds: float
    ) -> None:
        """The call's audit entry, in a unit of work of its own: the answer has none. A failure
        to write it is logged and does not fail the answer, whose call is already made."""
        entry = NewAuditEntry(
            org_id=context.caller.org_id,
            actor_user_id=context.caller.user_id,
            action=TOOL_CALLED,
            target_type=TOOL_SERVER_TARGET,
            target_id=str(allowed.server.id),
            details={
                "toolServerName": allowed.server.name,
                "tool": allowed.tool.name,
                "agentId": context.agent.id,
                "threadId": context.thread_id,
                "durationMs": round(seconds * 1000),
                "ok": outcome == "ok",
                "outcome": outcome,
            },
        )
        try:
            async with self._sessions(context.caller) as session:
                await session.audit.record(entry)
                await session.uow.commit()
        except Exception:
            log.warning("tool call audit entry not written: %s", entry.details, exc_info=True)


class _Refused(Exception):
    def __init__(self, outcome: Outcome, message: str) -> None:
        super().__init__(message)
        self.outcome: Outcome = outcome
        self.message = message


def _spec(allowed: AllowedTool) -> ToolSpec:
    tool = allowed.tool
    description = tool.description.strip() or f"{tool.name} ({allowed.server.name})"
    return ToolSpec(
        name=allowed.name,
        description=description[:TOOL_DESCRIPTION_CHARS],
        parameters=_object_schema(tool.input_schema),
    )


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The tool's input schema as model providers take it: an object schema."""
    if schema.get("type") == "object":
        return schema
    if "type" not in schema and isinstance(schema.get("properties"), dict):
        return {"type": "object", **schema}
    return {"type": "object", "properties": {}}


def _text(output: ToolOutput) -> str:
    return "\n".join(
        str(part.get("text", "")) for part in output.content if part.get("type") == "text"
    ).strip()


def _result(output: ToolOutput) -> dict[str, Any]:
    """The call's result as streamed and stored: its content parts (text cut so that their
    texts hold at most `TOOL_RESULT_CHARS`, with a note) and its structured content if any."""
    content: list[dict[str, Any]] = []
    room = TOOL_RESULT_CHARS
    total = sum(len(str(p.get("text", ""))) for p in output.content if p.get("type") == "text")
    for part in output.content:
        if part.get("type") == "image" and part.get("mediaType") not in IMAGE_TYPES:
            # Kept as data URLs and shown by clients: only the raster formats browsers show
            # inertly (an SVG can hold script).
            content.append({"type": "text", "text": f"[An image of type {part.get('mediaType')}]"})
        elif part.get("type") != "text":
            content.append(part)
        elif room > 0:
            text = str(part.get("text", ""))
            content.append({**part, "text": text[:room]})
            room -= len(text)
        else:
            room -= 1
    if room < 0:
        shown = TOOL_RESULT_CHARS
        content.append(
            {"type": "text", "text": f"[Only the first {shown} of {total} characters are shown.]"}
        )
    result: dict[str, Any] = {"content": content}
    if output.structured is not None:
        if len(json.dumps(output.structured, ensure_ascii=False)) <= TOOL_RESULT_CHARS:
            result["structured"] = output.structured
        else:
            note = f"[The structured result is over {TOOL_RESULT_CHARS} characters, not kept.]"
            content.append({"type": "text", "text": note})
    return result
