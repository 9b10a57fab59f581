"""Request and response bodies of `/tools`: msgspec Structs, camelCase. Header values come in
only; a server's response holds their names."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, UnsetType

from domain.skills import NAME_MAX
from domain.text import not_a_string, required
from domain.tool_server_fields import (
    APPROVAL_INVALID,
    ENABLED_INVALID,
    HEADERS_INVALID,
    KIND_INVALID,
    TOO_MANY_HEADERS,
    TOOL_NAME_MAX,
    URL_INVALID,
    URL_PATTERN,
    URL_TOO_LONG,
)
from domain.tool_servers import (
    DESCRIPTION_MAX,
    HEADER_VALUE_MAX,
    MAX_HEADERS,
    MAX_TOOLS_PER_SERVER,
    TOOL_SERVER_ID_REQUIRED,
    URL_MAX,
    ToolServer,
    name_problem,
)
from entrypoints.http.rules import ABSENT, NULL_OR_EMPTY, RANGE, TYPE, Rule, too_long_rule
from entrypoints.http.schemas import Camel, PositiveId, documented, text

NAME_INVALID = name_problem("-") or ""
Name = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=NAME_MAX,
        pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$",
        description="Lower-case letters, digits and single hyphens; unique in the organization",
        examples=["github"],
    ),
]
Kind = Literal["mcp", "openapi"]
Url = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=URL_MAX,
        extra_json_schema=documented(URL_PATTERN),
        description="http(s) URL: the MCP server's Streamable HTTP endpoint or the OpenAPI "
        "document; its host must be allowed (not loopback, private or link-local unless "
        "listed in AP_TOOL_ALLOWED_HOSTS)",
        examples=["https://mcp.example.com/mcp"],
    ),
]
Description = Annotated[str, text(DESCRIPTION_MAX)]
# The names and values `parse_headers` takes, stated in the document only (the use case says
# which header is wrong, never its value).
HEADER_NAME = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$"
HEADER_VALUE = r"^[\t\u0020-\u007e]*$"
HEADER_SCHEMA = {
    "maxProperties": MAX_HEADERS,
    "propertyNames": {"pattern": HEADER_NAME},
    "additionalProperties": {
        "type": "string",
        "maxLength": HEADER_VALUE_MAX,
        "pattern": HEADER_VALUE,
    },
}
Headers = Annotated[
    dict[str, str],
    Meta(
        max_length=MAX_HEADERS,
        extra_json_schema={"extra": HEADER_SCHEMA},
        description="Header names to values sent with every request to the server (secrets: "
        "stored encrypted, never returned; only their names are). Sent on a change, replaces "
        "every header.",
    ),
]
ToolName = Annotated[str, Meta(min_length=1, max_length=TOOL_NAME_MAX)]
# Litestar states a union's constraints once, beside its `oneOf`: the array's are said there
# again (they apply when the value is an array).
Approval = Annotated[
    Literal["never", "always"] | Annotated[list[ToolName], Meta(max_length=MAX_TOOLS_PER_SERVER)],
    Meta(
        description='"never", "always", or the names of the tools whose calls wait for a '
        "member's approval",
        extra_json_schema={
            "extra": {
                "maxItems": MAX_TOOLS_PER_SERVER,
                "items": {"type": "string", "minLength": 1, "maxLength": TOOL_NAME_MAX},
            }
        },
    ),
]

FIELD_RULES = (
    Rule("name", required("name"), ABSENT, "must be a non-empty string"),
    Rule("name", NAME_INVALID, detail=NAME_INVALID),
    Rule("kind", required("kind"), ABSENT, KIND_INVALID),
    Rule("kind", KIND_INVALID, detail="expected mcp or openapi"),
    Rule("url", required("url"), ABSENT, "must be a non-empty string"),
    Rule("url", URL_TOO_LONG, RANGE, "too long"),
    Rule("url", URL_INVALID, detail="expected http(s)://host/…"),
    too_long_rule("description", "description", DESCRIPTION_MAX),
    Rule("description", not_a_string("description"), TYPE, "expected a string"),
    Rule("headers", TOO_MANY_HEADERS, RANGE, "too many headers"),
    Rule("headers", HEADERS_INVALID, detail="expected an object of strings"),
    Rule("requireApproval", APPROVAL_INVALID, detail="invalid value"),
    Rule("enabled", ENABLED_INVALID, detail="expected true or false"),
)


class CreateToolServerBody(Camel):
    rules = FIELD_RULES

    name: Name
    kind: Kind
    url: Url
    description: Description | None = None
    headers: Headers | None = None
    require_approval: Approval | None = None
    enabled: bool | None = None


class UpdateToolServerBody(Camel):
    rules = (
        Rule("toolServerId", TOOL_SERVER_ID_REQUIRED),
        Rule("name", required("name"), NULL_OR_EMPTY, "must be a non-empty string"),
        Rule("kind", required("kind"), NULL_OR_EMPTY, KIND_INVALID),
        Rule("url", required("url"), NULL_OR_EMPTY, "must be a non-empty string"),
        *FIELD_RULES,
    )

    tool_server_id: PositiveId
    name: Name | UnsetType = UNSET
    kind: Kind | UnsetType = UNSET
    url: Url | UnsetType = UNSET
    description: Description | UnsetType | None = UNSET
    headers: Headers | UnsetType | None = UNSET
    require_approval: Approval | UnsetType | None = UNSET
    enabled: bool | UnsetType = UNSET


class RefreshToolServerBody(Camel):
    rules = (Rule("toolServerId", TOOL_SERVER_ID_REQUIRED),)

    tool_server_id: PositiveId


class ToolOut(Camel):
    name: str
    description: str
    input_schema: dict[str, Any]


class ToolServerOut(Camel):
    id: int
    name: str
    kind: str
    url: str
    description: str
    header_names: list[str]
    require_approval: Literal["never", "always"] | list[str]
    enabled: bool
    status: Literal["ready", "error"]
    error: str | None
    tools: list[ToolOut]
    refreshed_at: datetime | None
    created_at: datetime
    updated_at: datetime
    user_id: str

    @classmethod
    def of(cls, server: ToolServer) -> ToolServerOut:
        approval = server.require_approval
        return cls.from_entity(
            server,
            header_names=list(server.header_names),
            require_approval=approval if isinstance(approval, str) else list(approval),
            tools=ToolOut.from_entities(server.tools),
        )


class ToolServerResponse(Camel):
    success: bool
    tool_server: ToolServerOut


class ToolServerListResponse(Camel):
    success: bool
    tool_servers: list[ToolServerOut]
