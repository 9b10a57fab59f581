from __future__ import annotations

from dataclasses import dataclass

from application.ports.agent_repository import AgentRepository
from application.ports.unit_of_work import UnitOfWork
from domain.agents import TAG_NOT_FOUND, parse_tag_id, require_agent_manager
from domain.errors import NotFound
from domain.identity import Caller


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAgentTagCommand:
    caller: Caller
    tag_id: int

    @classmethod
    def parse(cls, *, caller: Caller, tag_id: object) -> DeleteAgentTagCommand:
        """An agent manager's request (403 otherwise) for a well-formed id (400)."""
        require_agent_manager(caller)
        return cls(caller=caller, tag_id=parse_tag_id(tag_id))


class DeleteAgentTag:
    """Delete a tag of the caller's organization and take it off every agent.

    Rules: only an agent manager may (403 otherwise); a missing or foreign tag is 404 "Tag not
    found".
    """

    def __init__(self, agents: AgentRepository, uow: UnitOfWork) -> None:
        self._agents = agents
        self._uow = uow

    async def execute(self, command: DeleteAgentTagCommand) -> None:
        require_agent_manager(command.caller)
        if not await self._agents.delete_tag(command.caller.org_id, command.tag_id):
            raise NotFound(TAG_NOT_FOUND)
        await self._uow.commit()
