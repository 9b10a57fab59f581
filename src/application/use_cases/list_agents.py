from __future__ import annotations

from dataclasses import dataclass

from application.ports.agent_repository import AgentRepository
from domain.agents import Agent, parse_tag_id
from domain.identity import Caller


@dataclass(frozen=True, slots=True, kw_only=True)
class ListAgentsQuery:
    caller: Caller
    tag_id: int | None = None

    @classmethod
    def parse(cls, *, caller: Caller, tag_id: object = None) -> ListAgentsQuery:
        """The query for all agents, or those of a well-formed tag id (400 otherwise)."""
        return cls(caller=caller, tag_id=None if tag_id is None else parse_tag_id(tag_id))


class ListAgents:
    """List the agents of the caller's organization, newest first, each with its tags.

    Rules: every member may list. With `tag_id` only the agents carrying that tag are listed; a
    tag the organization does not have matches no agent.
    """

    def __init__(self, agents: AgentRepository) -> None:
        self._agents = agents

    async def execute(self, query: ListAgentsQuery) -> list[Agent]:
        return await self._agents.list_all(query.caller.org_id, tag_id=query.tag_id)
