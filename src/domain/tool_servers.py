"""Tool servers: an organization's connections to MCP servers and OpenAPI-described HTTP APIs
whose tools its agents may call (`CONTRACT.md`, "Tools"), and the rules of their fields."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from domain.skills import is_skill_name

ToolServerKind = Literal["mcp", "openapi"]
TOOL_SERVER_KINDS: tuple[ToolServerKind, ...] = ("mcp", "openapi")
ToolServerStatus = Literal["ready", "error"]
Approval = Literal["never", "always"] | tuple[str, ...]
"""`requireApproval`: no call waits for a member (`never`), every call does (`always`), or the
calls of the tools named."""

TOOL_SERVER_NOT_FOUND = "Tool server not found"
TOOL_SERVER_ID_REQUIRED = "Valid tool server ID is required"
TOOL_SERVER_NAME_TAKEN = "A tool server with this name already exists"
TOOL_SERVER_CHANGED = "The tool server was changed meanwhile; send the change again"
UNKNOWN_TOOL_SERVERS = "Unknown tool server ids"
ADDRESS_NOT_ALLOWED = "Tool server address is not allowed"
HEADERS_FOR_NEW_HOST = "headers must be sent again when url moves the server to another host"
DESCRIPTION_MAX = 1024
URL_MAX = 2048
MAX_HEADERS = 20
HEADER_VALUE_MAX = 8192
MAX_TOOLS_PER_SERVER = 500
OFFERED_NAME_MAX = 64
SEPARATOR = "__"
"""Between a server's name and its tool's in the name a model is offered: `<server>__<tool>`."""

_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an RFC 9110 token


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """One tool a server offers, as it described it: its name there, what it does and the JSON
    Schema of its arguments."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolServer:
    """A tool server of one organization, with what its last refresh found (`tools`, or the
    `error` that stopped it). Its header values are secrets and are not held here: only their
    names."""

    id: int
    org_id: str
    user_id: str
    name: str
    kind: ToolServerKind
    url: str
    description: str
    header_names: tuple[str, ...]
    require_approval: Approval
    enabled: bool
    status: ToolServerStatus
    error: str | None
    tools: tuple[ToolDefinition, ...]
    refreshed_at: datetime | None
    created_at: datetime
    updated_at: datetime

    def needs_approval(self, tool_name: str) -> bool:
        """Whether a call of `tool_name` waits for a member's decision."""
        if self.require_approval == "always":
            return True
        if self.require_approval == "never":
            return False
        return tool_name in self.require_approval


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolGrant:
    """The tools of one server an agent may call: `names`, or all of them (None)."""

    tool_server_id: int
    names: tuple[str, ...] | None


def name_problem(value: object) -> str | None:
    """Why `value` is not a tool server name (the skill-name rule), or None."""
    if not isinstance(value, str):
        return "name must be a string"
    if not is_skill_name(value):
        return (
            "name must be 1-64 lower-case letters, digits and single hyphens, "
            "not starting or ending with a hyphen"
        )
    return None


def header_name_problem(value: str) -> str | None:
    """Why `value` is not an HTTP header name, or None."""
    if not _HEADER_NAME.fullmatch(value) or len(value) > 256:
        return f"header name {value[:64]!r} is not a valid HTTP header name"
    return None


def offered_name(server_name: str, tool_name: str) -> str:
    """The name a model is offered for a server's tool: `<server>__<tool>`, with the tool's
    characters outside those model providers accept replaced, cut to 64 characters."""
    tool = re.sub(r"[^A-Za-z0-9_-]", "_", tool_name)
    return f"{server_name}{SEPARATOR}{tool}"[:OFFERED_NAME_MAX]
