from __future__ import annotations

from dataclasses import dataclass

from application.ports.agent_repository import AgentRepository
from domain.agents import AGENT_NOT_FOUND, Agent, parse_agent_id
from domain.errors import NotFound
from domain.identity import Caller


@dataclass(frozen=True, slots=True, kw_only=True)
class GetAgentQuery:
    caller: Caller
    agent_id: int

    @classmethod
    def parse(cls, *, caller: Caller, agent_id: object) -> GetAgentQuery:
        """The query for a well-formed id (400 "Valid agent ID is required")."""
        return cls(caller=caller, agent_id=parse_agent_id(agent_id))


class GetAgent:
    """One agent of the caller's organization with its tags.

    Rules: every member may read agents; an agent that is missing or belongs to another
    organization is 404 "Agent not found".
    """

    def __init__(self, agents: AgentRepository) -> None:
        self._agents = agents

    async def execute(self, query: GetAgentQuery) -> Agent:
        agent = await self._agents.get(query.caller.org_id, query.agent_id)
        if agent is None:
            raise NotFound(AGENT_NOT_FOUND)
        return agent
