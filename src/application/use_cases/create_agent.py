from __future__ import annotations

from dataclasses import dataclass

from application.ports.agent_repository import AgentRepository
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.skill_repository import SkillRepository
from application.ports.tool_server_repository import ToolServerRepository
from application.ports.unit_of_work import UnitOfWork
from domain.agents import (
    DEFAULT_CHAT_MODEL,
    TOOLS,
    Agent,
    AgentFields,
    NewAgent,
    require_agent_manager,
)
from domain.errors import Invalid, field_error
from domain.identity import Caller
from domain.tool_servers import UNKNOWN_TOOL_SERVERS, ToolGrant


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
    skill be one of its active skills (400 naming the others); every tool server its `tools`
    name must be one of the organization's (400 "Unknown tool server ids" otherwise). The
    creator is recorded.
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
        await check_tool_servers(self._tool_servers, caller.org_id, fields.tools)
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


async def check_tool_servers(
    tool_servers: ToolServerRepository | None, org_id: str, grants: tuple[ToolGrant, ...]
) -> None:
    """Refuse (400 "Unknown tool server ids", naming them in `details`) grants of tool servers
    that are not the organization's; without a repository no server is known."""
    if not grants:
        return
    wanted = [grant.tool_server_id for grant in grants]
    known: set[int] = set()
    if tool_servers is not None:
        known = {server.id for server in await tool_servers.list(org_id, wanted, lock=True)}
    unknown = [server_id for server_id in wanted if server_id not in known]
    if unknown:
        raise Invalid(
            UNKNOWN_TOOL_SERVERS,
            [field_error(TOOLS, f"tool server {server_id} not found") for server_id in unknown],
        )
