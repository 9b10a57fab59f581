"""Conversations: the repository and its use cases per request, the background title job's
use case; the run log, which answers use outside any request, on the pool for the app's life
(each call its own short checkout); the usage ledger on a pool of its own."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
from dishka import Provider, Scope, provide, provide_all

from adapters.postgres.chat_runs import PgChatRunLog
from adapters.postgres.conversations import PgConversationRepository
from adapters.postgres.database import FairGate, create_pool
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
from entrypoints.database import Database

# Connections of the usage ledger's own pool (see `usage_ledger`).
LEDGER_POOL_SIZE = 4


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
    async def usage_ledger(
        self, settings: Settings, database: Database
    ) -> AsyncIterator[UsageLedger]:
        """On a small pool of its own: a model call is admitted or charged while its caller
        holds a connection of the main pool (a request's, a job's), and waiting there for a
        second one could deadlock once every connection is held by such a caller. The ledger's
        statements are short and wait for nothing else."""
        pool = await create_pool(
            database.url, app_role=settings.database_app_role, size=LEDGER_POOL_SIZE
        )
        yield PgUsageLedger(pool)
        await pool.close()

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
