from __future__ import annotations

from dataclasses import dataclass

from application.ports.agent_repository import AgentRepository
from domain.agents import AgentTag
from domain.identity import Caller


@dataclass(frozen=True, slots=True, kw_only=True)
class ListAgentTagsQuery:
    caller: Caller


class ListAgentTags:
    """List the tags of the caller's organization by name; every member may."""

    def __init__(self, agents: AgentRepository) -> None:
        self._agents = agents

    async def execute(self, query: ListAgentTagsQuery) -> list[AgentTag]:
        return await self._agents.list_tags(query.caller.org_id)
