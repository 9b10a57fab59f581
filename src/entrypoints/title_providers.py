"""Dishka provider for background conversation titles (the `chat.title` job), per job."""

from __future__ import annotations

from dishka import Provider, Scope, provide

from application.ports.agent_repository import AgentRepository
from application.ports.chat_model import ChatModelRegistry
from application.ports.conversation_repository import ConversationRepository
from application.ports.unit_of_work import UnitOfWork
from application.ports.usage_ledger import UsageLedger
from application.use_cases.generate_conversation_title import GenerateConversationTitle
from domain.usage import PriceList
from entrypoints.config import Settings


class TitleProvider(Provider):
    """`GenerateConversationTitle` on the job's organization-scoped connection, asking the
    deployment's default chat model and pricing its tokens with the configured prices."""

    scope = Scope.REQUEST

    @provide
    def generate_title(
        self,
        conversations: ConversationRepository,
        agents: AgentRepository,
        models: ChatModelRegistry,
        ledger: UsageLedger,
        uow: UnitOfWork,
        settings: Settings,
    ) -> GenerateConversationTitle:
        return GenerateConversationTitle(
            conversations,
            agents,
            models,
            ledger,
            PriceList(settings.model_prices),
            uow,
            settings.default_chat_model,
        )
