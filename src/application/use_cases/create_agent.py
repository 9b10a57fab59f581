from __future__ import annotations

from dataclasses import dataclass

from application.ports.agent_repository import AgentRepository
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.skill_repository import SkillRepository
from application.ports.unit_of_work import UnitOfWork
from domain.agents import DEFAULT_CHAT_MODEL, Agent, AgentFields, NewAgent, require_agent_manager
from domain.errors import Invalid, field_error
from domain.identity import Caller


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateAgentCommand:
    caller: Caller
    fields: AgentFields

    @classmethod
    def parse(cls, *, caller: Caller, **fields: object) -> CreateAgentCommand:
        """Who, then what: only an agent manager's request is read (403 otherwise), its fields
        parsed by `AgentFields.parse`."""
        require_agent_manager(caller)
        return cls(caller=caller, fields=AgentFields.parse(**fields))


class CreateAgent:
    """Create an agent in the caller's organization.

    Rules: only an agent manager (`org:admin` or `org:agents:manage`) may (403 otherwise). The
    fields follow `domain.agents.AGENT_FIELDS`; the model defaults to the deployment's default
    chat model. Every knowledge base and tag must belong to the caller's organization and every
    skill be one of its active skills (400 naming the others). The creator is recorded.
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
        caller, fields = command.caller, command.fields
        require_agent_manager(caller)
        await check_links(
            self._agents,
            self._knowledge_bases,
            self._skills,
            caller.org_id,
            kb_ids=fields.knowledge_base_ids,
            skill_ids=fields.skill_ids,
            tag_ids=fields.tag_ids,
        )
        agent = await self._agents.add(
            NewAgent.of(
                fields,
                org_id=caller.org_id,
                user_id=caller.user_id,
                model=fields.model or self._default_chat_model,
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
