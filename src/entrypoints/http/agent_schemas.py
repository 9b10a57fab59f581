"""Request and response bodies of `/agents` and `/agents/tags`: msgspec Structs, camelCase."""

from __future__ import annotations

from datetime import datetime

from msgspec import UNSET, UnsetType

from domain.agents import Agent, AgentTag
from entrypoints.http.schemas import Camel, Loose


class CreateAgentBody(Camel):
    name: str | None = None
    description: str | None = None
    role: str | None = None
    model: str | None = None
    knowledge_base_ids: list[Loose] | None = None
    skill_ids: list[Loose] | None = None
    tag_ids: list[Loose] | None = None


class UpdateAgentBody(Camel):
    agent_id: Loose = None
    name: str | UnsetType | None = UNSET
    description: str | UnsetType | None = UNSET
    role: str | UnsetType | None = UNSET
    model: str | UnsetType | None = UNSET
    knowledge_base_ids: list[Loose] | UnsetType | None = UNSET
    skill_ids: list[Loose] | UnsetType | None = UNSET
    tag_ids: list[Loose] | UnsetType | None = UNSET


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
    name: str | None = None
    color: str | None = None


class AgentTagResponse(Camel):
    success: bool
    tag: AgentTagOut


class AgentTagListResponse(Camel):
    success: bool
    tags: list[AgentTagOut]
