from __future__ import annotations

from dataclasses import dataclass

from application.ports.agent_repository import AgentRepository
from application.ports.unit_of_work import UnitOfWork
from domain.agents import AgentTag, require_agent_manager, validate_tag_color, validate_tag_name
from domain.identity import Caller


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateAgentTagCommand:
    caller: Caller
    name: str
    color: str | None = None

    @classmethod
    def parse(cls, *, caller: Caller, name: object, color: object = None) -> CreateAgentTagCommand:
        """Who, then what: an agent manager's request (403 otherwise), then the name (1 to 64
        characters on one line) and the colour (`#RRGGBB`, stored in lower case)."""
        require_agent_manager(caller)
        return cls(caller=caller, name=validate_tag_name(name), color=validate_tag_color(color))


class CreateAgentTag:
    """Create a tag for the organization's agents.

    Rules: only an agent manager may (403 otherwise). The name is unique within the
    organization (409 otherwise).
    """

    def __init__(self, agents: AgentRepository, uow: UnitOfWork) -> None:
        self._agents = agents
        self._uow = uow

    async def execute(self, command: CreateAgentTagCommand) -> AgentTag:
        require_agent_manager(command.caller)
        tag = await self._agents.add_tag(command.caller.org_id, command.name, command.color)
        await self._uow.commit()
        return tag
