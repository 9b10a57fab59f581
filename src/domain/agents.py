"""Agents and their tags: the fields, the rules for creating and changing them, who may."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, cast

from domain.errors import Forbidden, Invalid, field_error
from domain.identity import AGENTS_MANAGE, Caller
from domain.ids import NOT_A_JSON_INTEGER, parse_positive_id
from domain.models import validate_chat_model
from domain.search import FILTERS_INVALID, Filter, parse_filters
from domain.text import parse_line, parse_text
from domain.tool_servers import TOOL_SERVER_ID_REQUIRED, ToolGrant
from domain.values import UNSET, Parser, Unset, field_values, parse_all, parse_sent

AGENT_NOT_FOUND = "Agent not found"
AGENT_ID_REQUIRED = "Valid agent ID is required"
TAG_NOT_FOUND = "Tag not found"
TAG_ID_REQUIRED = "Valid tag ID is required"
CANNOT_MANAGE_AGENTS = "Agent management permission required"
DEFAULT_CHAT_MODEL = "local:smollm2-135m"
MAX_AGENT_NAME = 200
MAX_AGENT_DESCRIPTION = 4000
MAX_AGENT_ROLE = 20_000
MAX_LINKED_IDS = 50
MAX_TAG_NAME = 64
TAG_COLOR = re.compile(r"^#[0-9a-fA-F]{6}$")
KNOWLEDGE_FILTERS = "knowledgeFilters"
NOT_AN_OBJECT = "each filter is an object"
KNOWLEDGE_FILTERS_NOT_AN_OBJECT = f"{FILTERS_INVALID}: {NOT_AN_OBJECT}"
TOOLS = "tools"
MAX_TOOL_GRANTS = 50
MAX_GRANTED_NAMES = 500
MAX_GRANTED_NAME = 128
TOOLS_NOT_A_LIST = "tools must be a list of {toolServerId, names} objects"

FilterJson = dict[str, Any]
"""A filter as the client sent it (`domain.search.parse_filters` reads it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentTag:
    """A label an organization puts on its agents."""

    id: int
    org_id: str
    name: str
    color: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Agent:
    """An assistant of one organization: its instructions (`role`), the chat model it runs on,
    the knowledge bases it searches, the skills it may load and the tool servers' tools it may
    call (`tools`)."""

    id: int
    org_id: str
    user_id: str
    name: str
    description: str
    role: str
    model: str
    knowledge_base_ids: list[int]
    skill_ids: list[int]
    tags: list[AgentTag]
    created_at: datetime
    updated_at: datetime
    knowledge_filters: FilterJson | None = None
    tools: tuple[ToolGrant, ...] = ()

    def knowledge_filter(self) -> Filter | None:
        """The filter every search of the agent's knowledge bases applies, None for every file.
        A stored filter the rules no longer accept raises `Invalid`: its searches fail rather
        than widen."""
        return parse_filters(self.knowledge_filters)


def parse_agent_id(value: object) -> int:
    """An agent's id: a positive 64-bit integer (400 "Valid agent ID is required")."""
    return parse_positive_id(value, AGENT_ID_REQUIRED)


def parse_tag_id(value: object) -> int:
    """A tag's id: a positive 64-bit integer (400 "Valid tag ID is required")."""
    return parse_positive_id(value, TAG_ID_REQUIRED)


def require_agent_manager(caller: Caller) -> None:
    """Managing agents needs `org:admin` or the `org:agents:manage` permission."""
    if not caller.has_permission(AGENTS_MANAGE):
        raise Forbidden(CANNOT_MANAGE_AGENTS)


def validate_id_list(value: object, *, field: str) -> list[int]:
    """A list of at most 50 positive integer ids; duplicates are dropped, order is kept."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise Invalid(f"{field} must be a list of ids", [field_error(field, "expected a list")])
    if len(value) > MAX_LINKED_IDS:
        raise Invalid(
            f"{field} may hold at most {MAX_LINKED_IDS} ids", [field_error(field, "too many")]
        )
    message = linked_ids_invalid(field)
    ids: list[int] = []
    for item in value:
        try:
            ids.append(parse_positive_id(item, message))
        except Invalid:
            raise Invalid(message, [field_error(field, f"invalid id {item!r}")]) from None
    return list(dict.fromkeys(ids))


def linked_ids_invalid(field: str) -> str:
    """The message for a list of linked ids holding something else than positive ids."""
    return f"{field} must hold positive integer ids"


def _model_or_default(value: object) -> str | None:
    return None if value is None else validate_chat_model(value)


def validate_agent_name(value: object) -> str:
    """An agent's name: 1 to 200 characters after trimming, on one line (the title rule)."""
    return parse_line(value, field="name", label="Name", limit=MAX_AGENT_NAME)


def parse_knowledge_filters(value: object) -> FilterJson | None:
    """The files an agent's searches are limited to: null for all, else a filter
    (`domain.search.parse_filters`), kept as sent so that it reads back the same. Its errors
    name `knowledgeFilters`."""
    try:
        parsed = parse_filters(value)
    except Invalid as error:
        details = [{**detail, "field": KNOWLEDGE_FILTERS} for detail in error.details]
        raise Invalid(error.message, details) from None
    if parsed is None:
        return None
    return cast(FilterJson, value)


def parse_tool_grants(value: object) -> tuple[ToolGrant, ...]:
    """The tools an agent may call: null for none, else a list of at most 50
    `{toolServerId, names}`, each server once; `names` null (or absent) for all of that
    server's tools, else at most 500 distinct tool names of 1 to 128 characters. Whether the
    servers exist is the use case's rule."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise Invalid(TOOLS_NOT_A_LIST, [field_error(TOOLS, "expected a list")])
    if len(value) > MAX_TOOL_GRANTS:
        message = f"tools may name at most {MAX_TOOL_GRANTS} tool servers"
        raise Invalid(message, [field_error(TOOLS, "too many")])
    grants: dict[int, ToolGrant] = {}
    for index, item in enumerate(value):
        grant = _tool_grant(item, f"{TOOLS}[{index}]")
        if grant.tool_server_id in grants:
            message = f"tools names tool server {grant.tool_server_id} more than once"
            raise Invalid(message, [field_error(f"{TOOLS}[{index}].toolServerId", "repeated")])
        grants[grant.tool_server_id] = grant
    return tuple(grants.values())


def _tool_grant(item: object, where: str) -> ToolGrant:
    if not isinstance(item, dict):
        raise Invalid(TOOLS_NOT_A_LIST, [field_error(where, "expected an object")])
    unknown = sorted(set(item) - {"toolServerId", "names"})
    if unknown:
        message = f"{where} has unknown fields: {', '.join(map(str, unknown))[:200]}"
        raise Invalid(message, [field_error(where, "unknown field")])
    server_id = item.get("toolServerId")
    # A JSON integer only: the id's string form is not this body's.
    if not isinstance(server_id, int) or isinstance(server_id, bool):
        integral = isinstance(server_id, float) and server_id.is_integer()
        detail = NOT_A_JSON_INTEGER if integral else "required"
        raise Invalid(TOOL_SERVER_ID_REQUIRED, [field_error(f"{where}.toolServerId", detail)])
    server_id = parse_positive_id(server_id, TOOL_SERVER_ID_REQUIRED)
    return ToolGrant(tool_server_id=server_id, names=_granted_names(item.get("names"), where))


def _granted_names(names: object, where: str) -> tuple[str, ...] | None:
    field_name = f"{where}.names"
    if names is None:
        return None
    if not isinstance(names, list):
        message = f"{field_name} must be null or a list of tool names"
        raise Invalid(message, [field_error(field_name, "expected a list or null")])
    if len(names) > MAX_GRANTED_NAMES:
        message = f"{field_name} may hold at most {MAX_GRANTED_NAMES} tool names"
        raise Invalid(message, [field_error(field_name, "too many")])
    for name in names:
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_GRANTED_NAME:
            message = f"{field_name} must hold tool names of 1 to {MAX_GRANTED_NAME} characters"
            raise Invalid(message, [field_error(field_name, f"invalid name {name!r:.80}")])
    if len(set(names)) != len(names):
        message = f"{field_name} names a tool more than once"
        raise Invalid(message, [field_error(field_name, "repeated")])
    return tuple(names)


AGENT_FIELDS: Mapping[str, Parser] = {
    "name": validate_agent_name,
    "description": partial(parse_text, field="description", limit=MAX_AGENT_DESCRIPTION),
    "role": partial(parse_text, field="role", limit=MAX_AGENT_ROLE),
    "model": _model_or_default,
    "knowledge_base_ids": partial(validate_id_list, field="knowledgeBaseIds"),
    "skill_ids": partial(validate_id_list, field="skillIds"),
    "tag_ids": partial(validate_id_list, field="tagIds"),
    "knowledge_filters": parse_knowledge_filters,
    "tools": parse_tool_grants,
}
"""An agent's own fields and their rules, in the order a request's fields are checked: the
name is required, 1 to 200 characters on one line; the description (at most 4000 characters)
and the role, the agent's instructions (at most 20000), are optional texts; the model is
`local:<bundled model>` or `openai:<model>`, null for the deployment's default; the linked ids
are lists of at most 50 positive ids, duplicates dropped and order kept; the knowledge filters
are null (every file) or a search filter over the files' fields and metadata; the tools are
the tool servers' tools it may call (`parse_tool_grants`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentFields:
    """An agent's own fields as a manager sets them, parsed; `model` None means the
    deployment's default chat model."""

    name: str
    description: str = ""
    role: str = ""
    model: str | None = None
    knowledge_base_ids: list[int] = field(default_factory=list)
    skill_ids: list[int] = field(default_factory=list)
    tag_ids: list[int] = field(default_factory=list)
    knowledge_filters: FilterJson | None = None
    tools: tuple[ToolGrant, ...] = ()

    @classmethod
    def parse(cls, **raw: object) -> AgentFields:
        """A new agent's fields from the request's: each of `AGENT_FIELDS` in turn, an absent
        one as null."""
        return cls(**parse_all(AGENT_FIELDS, raw))


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentChanges:
    """The fields a change sends, parsed as a new agent's; `UNSET` marks one not sent (kept).
    `model` None puts the agent back on the deployment's default chat model."""

    name: str | Unset = UNSET
    description: str | Unset = UNSET
    role: str | Unset = UNSET
    model: str | Unset | None = UNSET
    knowledge_base_ids: list[int] | Unset = UNSET
    skill_ids: list[int] | Unset = UNSET
    tag_ids: list[int] | Unset = UNSET
    knowledge_filters: FilterJson | Unset | None = UNSET
    tools: tuple[ToolGrant, ...] | Unset = UNSET

    @classmethod
    def parse(cls, **raw: object) -> AgentChanges:
        """The changes of a request: each field sent, by its rule in `AGENT_FIELDS`."""
        return cls(**parse_sent(AGENT_FIELDS, raw))


@dataclass(frozen=True, slots=True, kw_only=True)
class NewAgent:
    """An agent about to be created: its organization, its creator and its fields, the model
    resolved."""

    org_id: str
    user_id: str
    name: str
    description: str
    role: str
    model: str
    knowledge_base_ids: list[int] = field(default_factory=list)
    skill_ids: list[int] = field(default_factory=list)
    tag_ids: list[int] = field(default_factory=list)
    knowledge_filters: FilterJson | None = None
    tools: tuple[ToolGrant, ...] = ()

    @classmethod
    def of(cls, fields: AgentFields, *, org_id: str, user_id: str, model: str) -> NewAgent:
        """The agent `fields` describe, created by `user_id`, on `model`."""
        return cls(**{**field_values(fields), "model": model}, org_id=org_id, user_id=user_id)


def validate_tag_name(value: object) -> str:
    """A tag name: 1 to 64 characters after trimming, on one line (the title rule)."""
    return parse_line(value, field="name", label="Name", limit=MAX_TAG_NAME)


TAG_COLOR_INVALID = "color must have the form #RRGGBB"


def validate_tag_color(value: object) -> str | None:
    """A tag colour is absent or `#RRGGBB`; stored in lower case."""
    if value is None:
        return None
    if not isinstance(value, str) or not TAG_COLOR.match(value):
        raise Invalid(TAG_COLOR_INVALID, [field_error("color", "expected #RRGGBB")])
    return value.lower()
