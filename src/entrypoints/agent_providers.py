"""Dishka providers for agents and agent tags: the repository and the use cases, per request."""

from __future__ import annotations

from dishka import Provider, Scope, provide, provide_all

from adapters.postgres.agents import PgAgentRepository
from adapters.postgres.database import OrgConnection
from application.ports.agent_repository import AgentRepository
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
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
    """`AgentRepository` on the request's organization-scoped connection, and the agent use
    cases; the default chat model comes from the settings."""

    scope = Scope.REQUEST

    @provide
    def agents(self, db: OrgConnection) -> AgentRepository:
        return PgAgentRepository(db)

    @provide
    def create_agent(
        self,
        agents: AgentRepository,
        kbs: KnowledgeBaseRepository,
        uow: UnitOfWork,
        settings: Settings,
    ) -> CreateAgent:
        return CreateAgent(agents, kbs, uow, settings.default_chat_model)

    @provide
    def update_agent(
        self,
        agents: AgentRepository,
        kbs: KnowledgeBaseRepository,
        uow: UnitOfWork,
        settings: Settings,
    ) -> UpdateAgent:
        return UpdateAgent(agents, kbs, uow, settings.default_chat_model)

    use_cases = provide_all(
        ListAgents,
        GetAgent,
        DeleteAgent,
        CreateAgentTag,
        ListAgentTags,
        DeleteAgentTag,
    )
