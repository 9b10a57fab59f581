from __future__ import annotations

from dataclasses import dataclass

from application.ports.agent_repository import AgentRepository
from application.ports.unit_of_work import UnitOfWork
from domain.agents import TAG_ID_REQUIRED, TAG_NOT_FOUND, require_agent_manager
from domain.errors import NotFound
from domain.identity import Caller
from domain.ids import parse_positive_id


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAgentTagCommand:
    caller: Caller
    tag_id: object


class DeleteAgentTag:
    """Delete a tag of the caller's organization and take it off every agent.

    Rules: only an agent manager may (403 otherwise). `tag_id` must be a positive integer (400
    "Valid tag ID is required"); a missing or foreign tag is 404 "Tag not found".
    """

    def __init__(self, agents: AgentRepository, uow: UnitOfWork) -> None:
        self._agents = agents
        self._uow = uow

    async def execute(self, command: DeleteAgentTagCommand) -> None:
        require_agent_manager(command.caller)
        tag_id = parse_positive_id(command.tag_id, TAG_ID_REQUIRED)
        if not await self._agents.delete_tag(command.caller.org_id, tag_id):
            raise NotFound(TAG_NOT_FOUND)
        await self._uow.commit()
