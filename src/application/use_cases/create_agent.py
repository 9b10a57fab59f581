from __future__ import annotations

from dataclasses import dataclass

from application.ports.agent_repository import AgentRepository
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.skill_repository import SkillRepository
from application.ports.unit_of_work import UnitOfWork
from domain.agents import (
    DEFAULT_CHAT_MODEL,
    MAX_AGENT_DESCRIPTION,
    MAX_AGENT_ROLE,
    Agent,
    NewAgent,
    require_agent_manager,
    validate_agent_name,
    validate_chat_model,
    validate_id_list,
    validate_text,
)
from domain.errors import Invalid, field_error
from domain.identity import Caller


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateAgentCommand:
    caller: Caller
    name: object
    description: object = None
    role: object = None
    model: object = None
    knowledge_base_ids: object = None
    skill_ids: object = None
    tag_ids: object = None


class CreateAgent:
    """Create an agent in the caller's organization.

    Rules: only an agent manager (`org:admin` or `org:agents:manage`) may (403 otherwise). The
    name is required (1 to 200 characters, trimmed); description (at most 4000 characters) and
    role, the agent's instructions (at most 20000), are optional. The model is
    `local:<bundled model>` or `openai:<model>` and defaults to the deployment's default chat
    model. `knowledgeBaseIds`, `skillIds` and `tagIds` are lists of at most 50 positive ids,
    duplicates dropped and order kept; every knowledge base and tag must belong to the caller's
    organization (400 naming the others); skill ids are stored as given. The creator is
    recorded.
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

    async def execute(self, command: CreateAgentCommand) -> Agent:
        caller = command.caller
        require_agent_manager(caller)
        name = validate_agent_name(command.name)
        description = validate_text(
            command.description, field="description", limit=MAX_AGENT_DESCRIPTION
        )
        role = validate_text(command.role, field="role", limit=MAX_AGENT_ROLE)
        model = validate_chat_model(
            self._default_chat_model if command.model is None else command.model
        )
        kb_ids = validate_id_list(command.knowledge_base_ids, field="knowledgeBaseIds")
        skill_ids = validate_id_list(command.skill_ids, field="skillIds")
        tag_ids = validate_id_list(command.tag_ids, field="tagIds")
        await check_links(
            self._agents,
            self._knowledge_bases,
            self._skills,
            caller.org_id,
            kb_ids=kb_ids,
            skill_ids=skill_ids,
            tag_ids=tag_ids,
        )
        agent = await self._agents.add(
            NewAgent(
                org_id=caller.org_id,
                user_id=caller.user_id,
                name=name,
                description=description,
                role=role,
                model=model,
                knowledge_base_ids=kb_ids,
                skill_ids=skill_ids,
                tag_ids=tag_ids,
            )
        )
        await self._uow.commit()
        return agent


async def check_links(
    agents: AgentRepository,
    knowledge_bases: KnowledgeBaseRepository,
    skills: SkillRepository,
    org_id: str,
    *,
    kb_ids: list[int] | None,
    skill_ids: list[int] | None,
    tag_ids: list[int] | None,
) -> None:
    """Refuse (400, naming them) knowledge bases, active skills and tags that are not the
    organization's."""
    if kb_ids:
        unknown_kbs = [kb for kb in kb_ids if await knowledge_bases.get(org_id, kb) is None]
        if unknown_kbs:
            raise Invalid(
                "Unknown knowledge base ids: " + ", ".join(map(str, unknown_kbs)),
                [
                    field_error("knowledgeBaseIds", f"knowledge base {kb} not found")
                    for kb in unknown_kbs
                ],
            )
    if skill_ids:
        unknown_skills = await skills.missing(org_id, skill_ids)
        if unknown_skills:
            raise Invalid(
                "Unknown skill ids: " + ", ".join(map(str, unknown_skills)),
                [field_error("skillIds", f"skill {skill} not found") for skill in unknown_skills],
            )
    if tag_ids:
        unknown_tags = await agents.missing_tags(org_id, tag_ids)
        if unknown_tags:
            raise Invalid(
                "Unknown tag ids: " + ", ".join(map(str, unknown_tags)),
                [field_error("tagIds", f"tag {tag} not found") for tag in unknown_tags],
            )
