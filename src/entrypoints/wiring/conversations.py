"""Conversations: the repository and its use cases per request, the background title job's
use case; the run log and the usage ledger, which answers use outside any request, on the pool
for the app's life (each call its own short checkout)."""

from __future__ import annotations

import asyncpg
from dishka import Provider, Scope, provide, provide_all

from adapters.postgres.chat_runs import PgChatRunLog
from adapters.postgres.conversations import PgConversationRepository
from adapters.postgres.database import FairGate
from adapters.postgres.usage import PgUsageLedger
from application.metering import SpendMeter
from application.ports.agent_repository import AgentRepository
from application.ports.chat_model import ChatModelRegistry
from application.ports.chat_run_log import ChatRunLog
from application.ports.clock import Clock
from application.ports.conversation_repository import ConversationRepository
from application.ports.unit_of_work import UnitOfWork
from application.ports.usage_ledger import UsageLedger
from application.use_cases.delete_conversation import DeleteConversation
from application.use_cases.generate_conversation_title import GenerateConversationTitle
from application.use_cases.get_conversation import GetConversation
from application.use_cases.list_conversations import ListConversations
from application.use_cases.rename_conversation import RenameConversation
from domain.usage import PriceList
from entrypoints.config import Settings


class ConversationProvider(Provider):
    """Everything behind `/getConversation`, `/conversations` and the `chat.title` job."""

    scope = Scope.REQUEST

    conversations = provide(PgConversationRepository, provides=ConversationRepository)
    use_cases = provide_all(
        GetConversation, ListConversations, DeleteConversation, RenameConversation
    )

    @provide(scope=Scope.APP)
    def run_log(self, pool: asyncpg.Pool, gate: FairGate) -> ChatRunLog:
        return PgChatRunLog(pool, gate)

    @provide(scope=Scope.APP)
    def usage_ledger(self, pool: asyncpg.Pool, gate: FairGate) -> UsageLedger:
        return PgUsageLedger(pool, gate)

    @provide(scope=Scope.APP)
    def spend_meter(self, ledger: UsageLedger, prices: PriceList, clock: Clock) -> SpendMeter:
        return SpendMeter(ledger, prices, clock)

    @provide
    def generate_title(
        self,
        conversations: ConversationRepository,
        agents: AgentRepository,
        models: ChatModelRegistry,
        meter: SpendMeter,
        uow: UnitOfWork,
        settings: Settings,
    ) -> GenerateConversationTitle:
        return GenerateConversationTitle(
            conversations, agents, models, meter, uow, settings.default_chat_model
        )
