"""Request and response bodies of `/agents` and `/agents/tags`: msgspec Structs, camelCase."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from msgspec import UNSET, Meta, UnsetType

from domain.agents import (
    AGENT_ID_REQUIRED,
    KNOWLEDGE_FILTERS,
    KNOWLEDGE_FILTERS_NOT_AN_OBJECT,
    MAX_AGENT_DESCRIPTION,
    MAX_AGENT_NAME,
    MAX_AGENT_ROLE,
    MAX_GRANTED_NAME,
    MAX_GRANTED_NAMES,
    MAX_LINKED_IDS,
    MAX_TAG_NAME,
    MAX_TOOL_GRANTS,
    NOT_AN_OBJECT,
    TAG_COLOR,
    TAG_COLOR_INVALID,
    TOOLS,
    TOOLS_NOT_A_LIST,
    Agent,
    linked_ids_invalid,
)
from domain.ids import MAX_BIGINT
from domain.search import MAX_FILTER_CONDITIONS, MAX_FILTER_DEPTH
from entrypoints.http.filter_schemas import FILTERS_JSON_SCHEMA
from entrypoints.http.rules import (
    NULL_OR_EMPTY,
    RANGE,
    Rule,
    required_rule,
    too_long_rule,
)
from entrypoints.http.schemas import (
    ID_ITEMS,
    Camel,
    ChatModel,
    PositiveId,
    line,
    text,
)

Name = Annotated[str, line(MAX_AGENT_NAME)]
Description = Annotated[str, text(MAX_AGENT_DESCRIPTION)]
Ids = Annotated[list[PositiveId], Meta(max_length=MAX_LINKED_IDS, extra_json_schema=ID_ITEMS)]
Role = Annotated[str, text(MAX_AGENT_ROLE)]
Model = ChatModel


KnowledgeFilters = Annotated[
    dict[str, Any],
    Meta(
        description="Limits the files the agent reads to those matching: a condition "
        "`{key, op, value}` over a file field (fileId, fileName, contentType, fileSize, "
        "createdAt) or a key of its userMetadata (`userMetadata.<key>` always names one), or "
        f"`{{and: [...]}}` / `{{or: [...]}}`, nested at most {MAX_FILTER_DEPTH} deep with at "
        f"most {MAX_FILTER_CONDITIONS} conditions in all, as `POST /kb/search`'s `filters`; "
        "null for every file",
        extra_json_schema=FILTERS_JSON_SCHEMA,
    ),
]
TOOL_GRANT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["toolServerId"],
    "additionalProperties": False,
    "properties": {
        "toolServerId": {"type": "integer", "minimum": 1, "maximum": MAX_BIGINT},
        "names": {
            "type": ["array", "null"],
            "maxItems": MAX_GRANTED_NAMES,
            "uniqueItems": True,
            "items": {"type": "string", "minLength": 1, "maxLength": MAX_GRANTED_NAME},
        },
    },
}
# Items are typed loosely so that the domain's messages (`parse_tool_grants`) name what is
# wrong; the document states their shape.
Tools = Annotated[
    list[Any],
    Meta(
        description="The tool servers' tools the agent may call: `{toolServerId, names}`, "
        "`names` null (or absent) for all of the server's tools; each server once, at most "
        f"{MAX_TOOL_GRANTS}",
        extra_json_schema={"extra": {"maxItems": MAX_TOOL_GRANTS, "items": TOOL_GRANT_SCHEMA}},
    ),
]
FIELD_RULES = (
    too_long_rule("name", "Name", MAX_AGENT_NAME),
    too_long_rule("description", "description", MAX_AGENT_DESCRIPTION),
    too_long_rule("role", "role", MAX_AGENT_ROLE),
    *(
        Rule(field, linked_ids_invalid(field), detail=f"invalid {field}")
        for field in ("knowledgeBaseIds", "skillIds", "tagIds")
    ),
    Rule(KNOWLEDGE_FILTERS, KNOWLEDGE_FILTERS_NOT_AN_OBJECT, detail=NOT_AN_OBJECT),
    Rule(TOOLS, TOOLS_NOT_A_LIST, detail="expected a list"),
)


class CreateAgentBody(Camel):
    rules = (required_rule("name", "Name"), *FIELD_RULES)

    name: Name
    description: Description | None = None
    role: Role | None = None
    model: Model | None = None
    knowledge_base_ids: Ids | None = None
    skill_ids: Ids | None = None
    tag_ids: Ids | None = None
    knowledge_filters: KnowledgeFilters | None = None
    tools: Tools | None = None


class UpdateAgentBody(Camel):
    rules = (
        Rule("agentId", AGENT_ID_REQUIRED),
        required_rule("name", "Name", NULL_OR_EMPTY),
        *FIELD_RULES,
    )

    agent_id: PositiveId
    name: Name | UnsetType = UNSET
    description: Description | UnsetType | None = UNSET
    role: Role | UnsetType | None = UNSET
    model: Model | UnsetType | None = UNSET
    knowledge_base_ids: Ids | UnsetType | None = UNSET
    skill_ids: Ids | UnsetType | None = UNSET
    tag_ids: Ids | UnsetType | None = UNSET
    knowledge_filters: KnowledgeFilters | UnsetType | None = UNSET
    tools: Tools | UnsetType | None = UNSET


class ToolGrantOut(Camel):
    tool_server_id: int
    names: list[str] | None


class AgentTagOut(Camel):
    id: int
    name: str
    color: str | None


class AgentOut(Camel):
    id: int
    name: str
    description: str
    role: str
    model: str
    knowledge_base_ids: list[int]
    skill_ids: list[int]
    tags: list[AgentTagOut]
    created_at: datetime
    updated_at: datetime
    user_id: str
    knowledge_filters: dict[str, Any] | None
    tools: list[ToolGrantOut]

    @classmethod
    def of(cls, agent: Agent) -> AgentOut:
        tools = [
            ToolGrantOut(
                tool_server_id=g.tool_server_id, names=None if g.names is None else list(g.names)
            )
            for g in agent.tools
        ]
        return cls.from_entity(agent, tags=AgentTagOut.from_entities(agent.tags), tools=tools)


class AgentResponse(Camel):
    success: bool
    agent: AgentOut


class AgentListResponse(Camel):
    success: bool
    agents: list[AgentOut]


class CreateAgentTagBody(Camel):
    rules = (
        required_rule("name", "Name"),
        too_long_rule("name", "Name", MAX_TAG_NAME),
        Rule("color", TAG_COLOR_INVALID, RANGE, "expected #RRGGBB"),
    )

    name: Annotated[str, line(MAX_TAG_NAME)]
    color: Annotated[str, Meta(pattern=TAG_COLOR.pattern, examples=["#1e90ff"])] | None = None


class AgentTagResponse(Camel):
    success: bool
    tag: AgentTagOut


class AgentTagListResponse(Camel):
    success: bool
    tags: list[AgentTagOut]
