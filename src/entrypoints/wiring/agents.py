"""Agents and agent tags: the repository on the request's connection and the use cases; the
default chat model comes from the settings."""

from __future__ import annotations

from dishka import Provider, Scope, provide, provide_all

from adapters.postgres.agents import PgAgentRepository
from application.ports.agent_repository import AgentRepository
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.skill_repository import SkillRepository
from application.ports.tool_server_repository import ToolServerRepository
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.create_agent import CreateAgent
from application.use_cases.create_agent_tag import CreateAgentTag
from application.use_cases.delete_agent import DeleteAgent
from application.use_cases.delete_agent_tag import DeleteAgentTag
from application.use_cases.get_agent import GetAgent
from application.use_cases.list_agent_tags import ListAgentTags
from application.use_cases.list_agents import ListAgents
from application.use_cases.update_agent import UpdateAgent
from entrypoints.config import Settings


class AgentProvider(Provider):
    """Everything behind `/agents` and `/agent-tags`."""

    scope = Scope.REQUEST

    agents = provide(PgAgentRepository, provides=AgentRepository)
    use_cases = provide_all(
        ListAgents, GetAgent, DeleteAgent, CreateAgentTag, ListAgentTags, DeleteAgentTag
    )

    @provide
    def create_agent(
        self,
        agents: AgentRepository,
        kbs: KnowledgeBaseRepository,
        skills: SkillRepository,
        uow: UnitOfWork,
        s: Settings,
        tool_servers: ToolServerRepository,
    ) -> CreateAgent:
        return CreateAgent(
            agents, kbs, skills, uow, s.default_chat_model, tool_servers=tool_servers
        )

    @provide
    def update_agent(
        self,
        agents: AgentRepository,
        kbs: KnowledgeBaseRepository,
        skills: SkillRepository,
        uow: UnitOfWork,
        s: Settings,
        tool_servers: ToolServerRepository,
    ) -> UpdateAgent:
        return UpdateAgent(
            agents, kbs, skills, uow, s.default_chat_model, tool_servers=tool_servers
        )
