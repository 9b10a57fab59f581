from __future__ import annotations

from dataclasses import dataclass

from application.ports.agent_repository import AgentRepository
from application.ports.unit_of_work import UnitOfWork
from domain.agents import AGENT_NOT_FOUND, parse_agent_id, require_agent_manager
from domain.errors import NotFound
from domain.identity import Caller


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAgentCommand:
    caller: Caller
    agent_id: int

    @classmethod
    def parse(cls, *, caller: Caller, agent_id: object) -> DeleteAgentCommand:
        """An agent manager's request (403 otherwise) for a well-formed id (400)."""
        require_agent_manager(caller)
        return cls(caller=caller, agent_id=parse_agent_id(agent_id))


class DeleteAgent:
    """Delete an agent of the caller's organization.

    Rules: only an agent manager may (403 otherwise); a missing or foreign agent is 404 "Agent not
    found". Its links to knowledge bases and tags go with it; its conversations stay, no longer
    linked to an agent.
    """

    def __init__(self, agents: AgentRepository, uow: UnitOfWork) -> None:
        self._agents = agents
        self._uow = uow

    async def execute(self, command: DeleteAgentCommand) -> None:
        require_agent_manager(command.caller)
        if not await self._agents.delete(command.caller.org_id, command.agent_id):
            raise NotFound(AGENT_NOT_FOUND)
        await self._uow.commit()
