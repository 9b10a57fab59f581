"""Request and response bodies of `/agents` and `/agents/tags`: msgspec Structs, camelCase."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from msgspec import UNSET, Meta, UnsetType

from domain.agents import Agent, AgentTag
from entrypoints.http.schemas import (
    ID_ITEMS,
    NO_NUL,
    ONE_LINE,
    Camel,
    ChatModel,
    Description,
    Name,
    PositiveId,
    documented,
)

Ids = Annotated[list[PositiveId], Meta(max_length=50, extra_json_schema=ID_ITEMS)]
Role = Annotated[str, Meta(max_length=20_000, extra_json_schema=documented(NO_NUL))]
Model = ChatModel


class CreateAgentBody(Camel):
    name: Name
    description: Description | None = None
    role: Role | None = None
    model: Model | None = None
    knowledge_base_ids: Ids | None = None
    skill_ids: Ids | None = None
    tag_ids: Ids | None = None


class UpdateAgentBody(Camel):
    agent_id: PositiveId
    name: Name | UnsetType = UNSET
    description: Description | UnsetType | None = UNSET
    role: Role | UnsetType | None = UNSET
    model: Model | UnsetType | None = UNSET
    knowledge_base_ids: Ids | UnsetType | None = UNSET
    skill_ids: Ids | UnsetType | None = UNSET
    tag_ids: Ids | UnsetType | None = UNSET


class AgentTagOut(Camel):
    id: int
    name: str
    color: str | None

    @classmethod
    def of(cls, tag: AgentTag) -> AgentTagOut:
        return cls(id=tag.id, name=tag.name, color=tag.color)


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

    @classmethod
    def of(cls, agent: Agent) -> AgentOut:
        return cls(
            id=agent.id,
            name=agent.name,
            description=agent.description,
            role=agent.role,
            model=agent.model,
            knowledge_base_ids=agent.knowledge_base_ids,
            skill_ids=agent.skill_ids,
            tags=[AgentTagOut.of(tag) for tag in agent.tags],
            created_at=agent.created_at,
            updated_at=agent.updated_at,
            user_id=agent.user_id,
        )


class AgentResponse(Camel):
    success: bool
    agent: AgentOut


class AgentListResponse(Camel):
    success: bool
    agents: list[AgentOut]


class CreateAgentTagBody(Camel):
    name: Annotated[
        str,
        Meta(min_length=1, max_length=64, pattern=r"\S", extra_json_schema=documented(ONE_LINE)),
    ]
    color: Annotated[str, Meta(pattern=r"^#[0-9A-Fa-f]{6}$", examples=["#1e90ff"])] | None = None


class AgentTagResponse(Camel):
    success: bool
    tag: AgentTagOut


class AgentTagListResponse(Camel):
    success: bool
    tags: list[AgentTagOut]
