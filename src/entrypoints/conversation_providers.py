"""Dishka providers for conversations: the repository and its use cases per request; the run
log and the usage ledger, which background tasks use outside any request, for the app's life."""

from __future__ import annotations

import asyncpg
from dishka import Provider, Scope, provide, provide_all

from adapters.postgres.chat_runs import PgChatRunLog
from adapters.postgres.conversations import PgConversationRepository
from adapters.postgres.database import FairGate, OrgConnection
from adapters.postgres.usage import PgUsageLedger
from application.ports.chat_run_log import ChatRunLog
from application.ports.conversation_repository import ConversationRepository
from application.ports.usage_ledger import UsageLedger
from application.use_cases.delete_conversation import DeleteConversation
from application.use_cases.get_conversation import GetConversation
from application.use_cases.list_conversations import ListConversations
from application.use_cases.rename_conversation import RenameConversation


class ConversationProvider(Provider):
    """`ConversationRepository` on the request's connection and the conversation use cases;
    `ChatRunLog` and `UsageLedger` on the pool, each call its own short checkout."""

    scope = Scope.REQUEST

    @provide
    def conversations(self, db: OrgConnection) -> ConversationRepository:
        return PgConversationRepository(db)

    @provide(scope=Scope.APP)
    def run_log(self, pool: asyncpg.Pool, gate: FairGate) -> ChatRunLog:
        return PgChatRunLog(pool, gate)

    @provide(scope=Scope.APP)
    def usage_ledger(self, pool: asyncpg.Pool, gate: FairGate) -> UsageLedger:
        return PgUsageLedger(pool, gate)

    use_cases = provide_all(
        GetConversation,
        ListConversations,
        DeleteConversation,
        RenameConversation,
    )
