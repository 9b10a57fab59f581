from __future__ import annotations

from dataclasses import dataclass

from application.ports.agent_repository import AgentRepository
from domain.agents import TAG_ID_REQUIRED, Agent
from domain.identity import Caller
from domain.ids import parse_positive_id


@dataclass(frozen=True, slots=True, kw_only=True)
class ListAgentsQuery:
    caller: Caller
    tag_id: object = None


class ListAgents:
    """List the agents of the caller's organization, newest first, each with its tags.

    Rules: every member may list. With `tag_id` (a positive integer, else 400 "Valid tag ID is
    required") only the agents carrying that tag are listed; a tag the organization does not
    have matches no agent.
    """

    def __init__(self, agents: AgentRepository) -> None:
        self._agents = agents

    async def execute(self, query: ListAgentsQuery) -> list[Agent]:
        tag_id = None if query.tag_id is None else parse_positive_id(query.tag_id, TAG_ID_REQUIRED)
        return await self._agents.list_all(query.caller.org_id, tag_id=tag_id)
