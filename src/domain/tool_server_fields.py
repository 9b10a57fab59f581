"""The fields of a tool server as a manager sends them (`POST /tools`, `PATCH /tools`), their
rules and messages, and the audit log's actions for tool servers (`CONTRACT.md`, "Tools").

The entity and the limits are `domain.tool_servers`'; this module holds what a request's
fields become: `TOOL_SERVER_FIELDS` in the order they are checked, which creation
(`ToolServerFields`) and change (`ToolServerChanges`) share.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import urlsplit

from domain.errors import Invalid, field_error
from domain.ids import parse_positive_id
from domain.text import check_storable, parse_text, required
from domain.tool_servers import (
    DESCRIPTION_MAX,
    HEADER_VALUE_MAX,
    MAX_HEADERS,
    MAX_TOOLS_PER_SERVER,
    TOOL_SERVER_ID_REQUIRED,
    TOOL_SERVER_KINDS,
    URL_MAX,
    Approval,
    ToolServerKind,
    header_name_problem,
    name_problem,
)
from domain.values import UNSET, Parser, Unset, parse_all, parse_sent

TOOL_SERVER_CREATED = "tool_server.created"
TOOL_SERVER_UPDATED = "tool_server.updated"
TOOL_SERVER_DELETED = "tool_server.deleted"
TOOL_SERVER_REFRESHED = "tool_server.refreshed"

TOOL_NAME_MAX = 128
KIND_INVALID = 'kind must be "mcp" or "openapi"'
URL_INVALID = "url must be an http or https URL"
URL_TOO_LONG = f"url must be at most {URL_MAX} characters"
URL_CREDENTIALS = "url must not hold a user name or password; send credentials as headers"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_PORT = r"6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}"
URL_PATTERN = (
    rf"^[Hh][Tt][Tt][Pp][Ss]?://(?:{_LABEL}(?:\.{_LABEL})*\.?|\[[0-9A-Fa-f:.]+\])"
    rf"(?::(?:{_PORT}))?(?:[/?#][\x21-\x7e]*)?$"
)
"""An http(s) URL: a host name, IPv4 or bracketed IPv6 address, an optional port from 1, then
printable ASCII (a client percent-encodes the rest); no user name or password."""
_URL = re.compile(URL_PATTERN)
IPV6_INVALID = "url holds an invalid IPv6 address"
HEADERS_INVALID = "headers must be an object of header names to string values"
TOO_MANY_HEADERS = f"headers may hold at most {MAX_HEADERS} headers"
HEADER_NAME_INVALID = "headers must have valid HTTP header names"
HEADER_VALUE_INVALID = (
    f"header values must be strings of at most {HEADER_VALUE_MAX} characters: visible ASCII, "
    "spaces and tabs"
)
APPROVAL_INVALID = (
    'requireApproval must be "never", "always" or a list of at most '
    f"{MAX_TOOLS_PER_SERVER} tool names of 1-{TOOL_NAME_MAX} characters"
)
ENABLED_INVALID = "enabled must be true or false"
HEADERS_UNREADABLE = (
    "The stored header values cannot be decrypted with the configured keys; send the headers again"
)


def parse_tool_server_id(value: object) -> int:
    """A tool server's id: a positive 64-bit integer (400 "Valid tool server ID is
    required")."""
    return parse_positive_id(value, TOOL_SERVER_ID_REQUIRED)


def parse_name(value: object) -> str:
    """Required; the skill-name rule (`domain.tool_servers.name_problem`)."""
    if value is None or value == "":
        raise Invalid(required("name"), [field_error("name", "must be a non-empty string")])
    problem = name_problem(value)
    if problem is not None:
        raise Invalid(problem, [field_error("name", problem)])
    return cast(str, value)


def parse_kind(value: object) -> ToolServerKind:
    """Required: `mcp` or `openapi`."""
    if value is None:
        raise Invalid(required("kind"), [field_error("kind", KIND_INVALID)])
    if value not in TOOL_SERVER_KINDS:
        raise Invalid(KIND_INVALID, [field_error("kind", "expected mcp or openapi")])
    return value


def parse_url(value: object) -> str:
    """Required: an absolute http(s) URL (`URL_PATTERN`), at most `URL_MAX` characters, without
    credentials (these belong in the headers, which are kept secret; the URL is shown to every
    member). Whether its host may be reached is the connector's check."""
    if value is None or value == "":
        raise Invalid(required("url"), [field_error("url", "must be a non-empty string")])
    if not isinstance(value, str):
        raise Invalid(URL_INVALID, [field_error("url", "expected a string")])
    if len(value) > URL_MAX:
        raise Invalid(URL_TOO_LONG, [field_error("url", "too long")])
    if not _URL.fullmatch(value):
        before_path = value.partition("://")[2].split("/", 1)[0]
        message = URL_CREDENTIALS if "@" in before_path else URL_INVALID
        raise Invalid(message, [field_error("url", "expected http(s)://host[:port]/…")])
    try:
        urlsplit(value).port  # noqa: B018 - checks a bracketed IPv6 address
    except ValueError:
        raise Invalid(IPV6_INVALID, [field_error("url", "not a valid IPv6 address")]) from None
    return value


def parse_description(value: object) -> str:
    """Optional free text of at most `DESCRIPTION_MAX` characters, trimmed; absent is empty."""
    return parse_text(value, field="description", limit=DESCRIPTION_MAX)


def _header_value_ok(value: object) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= HEADER_VALUE_MAX
        # Visible ASCII, spaces and tabs: what every HTTP client sends as is (RFC 9110 field
        # values; others are obsolete, and the MCP SDK's client refuses them at call time).
        and all(c == "\t" or 0x20 <= ord(c) < 0x7F for c in value)
    )


def parse_headers(value: object) -> dict[str, str]:
    """Optional: an object of at most `MAX_HEADERS` headers, each a valid HTTP header name
    (names differing only in case are one header, refused twice) to a string value of at most
    `HEADER_VALUE_MAX` characters of visible ASCII, spaces and tabs.
    Absent or null is no header. A message names a bad header, never its value."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise Invalid(HEADERS_INVALID, [field_error("headers", "expected an object")])
    if len(value) > MAX_HEADERS:
        raise Invalid(TOO_MANY_HEADERS, [field_error("headers", "too many headers")])
    seen: set[str] = set()
    headers: dict[str, str] = {}
    for name, header_value in value.items():
        if not isinstance(name, str):
            raise Invalid(HEADERS_INVALID, [field_error("headers", "expected string names")])
        problem = header_name_problem(name)
        if problem is None and name.lower() in seen:
            problem = f"header name {name[:64]!r} is given twice"
        if problem is not None:
            raise Invalid(HEADER_NAME_INVALID, [field_error("headers", problem)])
        seen.add(name.lower())
        if not _header_value_ok(header_value):
            raise Invalid(
                HEADER_VALUE_INVALID,
                [field_error("headers", f"the value of {name!r} is not a valid header value")],
            )
        headers[name] = cast(str, header_value)
    return headers


def parse_require_approval(value: object) -> Approval:
    """Optional: `never` (the default), `always`, or a list of the tool names whose calls wait
    for a member's decision (at most `MAX_TOOLS_PER_SERVER`, each 1-128 characters;
    duplicates dropped, order kept)."""
    if value is None:
        return "never"
    if isinstance(value, str) and value in ("never", "always"):
        return cast(Approval, value)
    if not isinstance(value, list | tuple) or len(value) > MAX_TOOLS_PER_SERVER:
        raise Invalid(APPROVAL_INVALID, [field_error("requireApproval", "invalid value")])
    for name in value:
        if not isinstance(name, str) or not 1 <= len(name) <= TOOL_NAME_MAX:
            raise Invalid(APPROVAL_INVALID, [field_error("requireApproval", "invalid tool name")])
        check_storable(name, "requireApproval")
    return tuple(dict.fromkeys(cast(list[str], value)))


def parse_enabled(value: object) -> bool:
    """Optional: whether agents may offer the server's tools (default true)."""
    if value is None:
        return True
    if not isinstance(value, bool):
        raise Invalid(ENABLED_INVALID, [field_error("enabled", "expected true or false")])
    return value


TOOL_SERVER_FIELDS: Mapping[str, Parser] = {
    "name": parse_name,
    "kind": parse_kind,
    "url": parse_url,
    "description": parse_description,
    "headers": parse_headers,
    "require_approval": parse_require_approval,
    "enabled": parse_enabled,
}
"""A tool server's fields and their rules, in the order a request's fields are checked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolServerFields:
    """A new tool server's fields, parsed. `headers` holds secrets: never shown, never
    logged."""

    name: str
    kind: ToolServerKind
    url: str
    description: str = ""
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    require_approval: Approval = "never"
    enabled: bool = True

    @classmethod
    def parse(cls, **raw: object) -> ToolServerFields:
        """A new server's fields from the request's: each of `TOOL_SERVER_FIELDS` in turn, an
        absent one as null."""
        return cls(**parse_all(TOOL_SERVER_FIELDS, raw))


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolServerChanges:
    """The fields a change sends, parsed as a new server's; `UNSET` marks one not sent (kept).
    `headers`, when sent, replaces every header (null or `{}`: none)."""

    name: str | Unset = UNSET
    kind: ToolServerKind | Unset = UNSET
    url: str | Unset = UNSET
    description: str | Unset = UNSET
    headers: dict[str, str] | Unset = field(default=UNSET, repr=False)
    require_approval: Approval | Unset = UNSET
    enabled: bool | Unset = UNSET

    @classmethod
    def parse(cls, **raw: object) -> ToolServerChanges:
        """The changes of a request: each field sent, by its rule in `TOOL_SERVER_FIELDS`."""
        return cls(**parse_sent(TOOL_SERVER_FIELDS, raw))
