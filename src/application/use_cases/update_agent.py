from __future__ import annotations

from dataclasses import dataclass

from application.ports.agent_repository import AgentRepository
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.skill_repository import SkillRepository
from application.ports.tool_server_repository import ToolServerRepository
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.create_agent import check_links, check_tool_servers
from domain.agents import (
    AGENT_NOT_FOUND,
    DEFAULT_CHAT_MODEL,
    Agent,
    AgentChanges,
    parse_agent_id,
    require_agent_manager,
)
from domain.errors import NotFound
from domain.identity import Caller
from domain.values import Unset, sent_values


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateAgentCommand:
    caller: Caller
    agent_id: int
    changes: AgentChanges

    @classmethod
    def parse(cls, *, caller: Caller, agent_id: object, **fields: object) -> UpdateAgentCommand:
        """Who, then what: only an agent manager's request is read (403 otherwise); the id
        (400 "Valid agent ID is required"), then the fields sent (`AgentChanges.parse`)."""
        require_agent_manager(caller)
        return cls(
            caller=caller, agent_id=parse_agent_id(agent_id), changes=AgentChanges.parse(**fields)
        )


class UpdateAgent:
    """Change the fields of an agent the caller sent; fields not sent stay as they are.

    Rules: only an agent manager may (403 otherwise); a missing or foreign agent is 404 "Agent
    not found". A `null` description, role or id list clears it, `null` knowledge filters let
    the agent read every file again, a `null` model puts the agent back on the deployment's
    default chat model. A list that is sent replaces the agent's links (knowledge bases keep
    the order given), which must be the organization's as on creation; so must the tool servers
    of `tools` sent (400 "Unknown tool server ids"). The update time moves even when nothing
    else changed.
    """

    def __init__(
        self,
        agents: AgentRepository,
        knowledge_bases: KnowledgeBaseRepository,
        skills: SkillRepository,
        uow: UnitOfWork,
        default_chat_model: str = DEFAULT_CHAT_MODEL,
        *,
        tool_servers: ToolServerRepository | None = None,
    ) -> None:
        self._agents = agents
        self._knowledge_bases = knowledge_bases
        self._skills = skills
        self._uow = uow
        self._default_chat_model = default_chat_model
        self._tool_servers = tool_servers

    async def execute(self, command: UpdateAgentCommand) -> Agent:
        caller, changes = command.caller, command.changes
        require_agent_manager(caller)
        if await self._agents.get(caller.org_id, command.agent_id) is None:
            raise NotFound(AGENT_NOT_FOUND)
        await check_links(
            self._agents,
            self._knowledge_bases,
            self._skills,
            caller.org_id,
            kb_ids=_sent(changes.knowledge_base_ids),
            skill_ids=_sent(changes.skill_ids),
            tag_ids=_sent(changes.tag_ids),
        )
        if not isinstance(changes.tools, Unset):
            await check_tool_servers(self._tool_servers, caller.org_id, changes.tools)
        values = sent_values(changes)
        if "model" in values and values["model"] is None:
            values["model"] = self._default_chat_model
        agent = await self._agents.update(caller.org_id, command.agent_id, values)
        if agent is None:
            raise NotFound(AGENT_NOT_FOUND)
        await self._uow.commit()
        return agent


def _sent(ids: list[int] | Unset) -> list[int] | None:
    return None if isinstance(ids, Unset) else ids
