from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from application.ports.agent_repository import AgentRepository
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.skill_repository import SkillRepository
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.create_agent import check_links
from domain.agents import (
    AGENT_ID_REQUIRED,
    AGENT_NOT_FOUND,
    DEFAULT_CHAT_MODEL,
    MAX_AGENT_DESCRIPTION,
    MAX_AGENT_ROLE,
    Agent,
    require_agent_manager,
    validate_agent_name,
    validate_chat_model,
    validate_id_list,
    validate_text,
)
from domain.errors import NotFound
from domain.identity import Caller
from domain.ids import parse_positive_id
from domain.values import UNSET, Unset


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateAgentCommand:
    caller: Caller
    agent_id: object
    name: object | Unset = UNSET
    description: object | Unset = UNSET
    role: object | Unset = UNSET
    model: object | Unset = UNSET
    knowledge_base_ids: object | Unset = UNSET
    skill_ids: object | Unset = UNSET
    tag_ids: object | Unset = UNSET


class UpdateAgent:
    """Change the fields of an agent the caller sent; fields not sent stay as they are.

    Rules: only an agent manager may (403 otherwise). `agent_id` must be a positive integer
    (400 "Valid agent ID is required"); a missing or foreign agent is 404 "Agent not found".
    The same validation as creation applies to every field sent; `null` clears the description,
    the role and the id lists, and puts the model back to the deployment's default chat model.
    A list that is sent replaces the agent's links (knowledge bases keep the order given). The
    update time moves even when nothing else changed.
    """

    def __init__(
        self,
        agents: AgentRepository,
        knowledge_bases: KnowledgeBaseRepository,
        skills: SkillRepository,
        uow: UnitOfWork,
        default_chat_model: str = DEFAULT_CHAT_MODEL,
    ) -> None:
        self._agents = agents
        self._knowledge_bases = knowledge_bases
        self._skills = skills
        self._uow = uow
        self._default_chat_model = default_chat_model

    async def execute(self, command: UpdateAgentCommand) -> Agent:
        caller = command.caller
        require_agent_manager(caller)
        agent_id = parse_positive_id(command.agent_id, AGENT_ID_REQUIRED)
        changes: dict[str, Any] = {}
        if not isinstance(command.name, Unset):
            changes["name"] = validate_agent_name(command.name)
        if not isinstance(command.description, Unset):
            changes["description"] = validate_text(
                command.description, field="description", limit=MAX_AGENT_DESCRIPTION
            )
        if not isinstance(command.role, Unset):
            changes["role"] = validate_text(command.role, field="role", limit=MAX_AGENT_ROLE)
        if not isinstance(command.model, Unset):
            changes["model"] = validate_chat_model(
                self._default_chat_model if command.model is None else command.model
            )
        kb_ids: list[int] | None = None
        if not isinstance(command.knowledge_base_ids, Unset):
            kb_ids = validate_id_list(command.knowledge_base_ids, field="knowledgeBaseIds")
            changes["knowledge_base_ids"] = kb_ids
        skill_ids: list[int] | None = None
        if not isinstance(command.skill_ids, Unset):
            skill_ids = validate_id_list(command.skill_ids, field="skillIds")
            changes["skill_ids"] = skill_ids
        tag_ids: list[int] | None = None
        if not isinstance(command.tag_ids, Unset):
            tag_ids = validate_id_list(command.tag_ids, field="tagIds")
            changes["tag_ids"] = tag_ids

        if await self._agents.get(caller.org_id, agent_id) is None:
            raise NotFound(AGENT_NOT_FOUND)
        await check_links(
            self._agents,
            self._knowledge_bases,
            self._skills,
            caller.org_id,
            kb_ids=kb_ids,
            skill_ids=skill_ids,
            tag_ids=tag_ids,
        )
        agent = await self._agents.update(caller.org_id, agent_id, changes)
        if agent is None:
            raise NotFound(AGENT_NOT_FOUND)
        await self._uow.commit()
        return agent
