"""Chat wiring: the background answer machinery at APP scope, and the chat use cases run on
their own short organization-scoped connections.

A streaming answer can last minutes. The request scope of the HTTP integration lives as long
as the response, so a use case resolved from it would hold its pooled connection for the whole
stream; a hundred open streams would starve the pool. `ChatEntry` opens the connection for the
use case alone and returns it before the first byte of the stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from dishka import Provider, Scope, alias, provide

from adapters.background import AsyncioBackgroundTasks
from adapters.chat.run_streams import InProcessChatStreams
from adapters.postgres.agents import PgAgentRepository
from adapters.postgres.cancel_listener import PgCancelListener
from adapters.postgres.chunks import PgChunkRepository
from adapters.postgres.conversations import PgConversationRepository
from adapters.postgres.database import FairGate, OrgConnection, org_connection
from adapters.postgres.repositories import PgKnowledgeBaseRepository, PgMemberDirectory
from adapters.queue.pgqueuer_queue import PgQueuerJobQueue
from application.ports.chat_launcher import BackgroundTasks
from application.ports.chat_model import ChatModelRegistry
from application.ports.chat_run_log import ChatRunLog
from application.ports.chat_streams import ChatStreams
from application.ports.clock import Clock
from application.ports.embedder import EmbedderRegistry
from application.ports.knowledge_search import KnowledgeSearch
from application.ports.skill_catalog import SkillCatalog, SkillSummary
from application.ports.usage_ledger import UsageLedger
from application.use_cases.cancel_chat_response import (
    CancelChatResponse,
    CancelChatResponseCommand,
    CancelOutcome,
)
from application.use_cases.follow_chat_response import (
    FollowChatResponse,
    FollowChatResponseQuery,
)
from application.use_cases.generate_chat_response import GenerateChatResponse
from application.use_cases.record_member_seen import RecordMemberSeen
from application.use_cases.search_knowledge_base import (
    SearchKnowledgeBase,
    SearchKnowledgeBaseQuery,
)
from application.use_cases.send_chat_message import (
    ChatStarted,
    SendChatMessage,
    SendChatMessageCommand,
)
from domain.chat_stream import Chunk
from domain.chunks import SearchResult
from domain.errors import NotFound
from domain.identity import Caller, Identity
from domain.usage import PriceList
from entrypoints.config import Settings
from entrypoints.container import RecentlySeen
from entrypoints.database import Database


class PooledKnowledgeSearch:
    """`KnowledgeSearch` through `SearchKnowledgeBase`, each search on its own connection."""

    def __init__(self, pool: asyncpg.Pool, gate: FairGate, embedders: EmbedderRegistry) -> None:
        self._pool = pool
        self._gate = gate
        self._embedders = embedders

    async def search(
        self, caller: Caller, kb_ids: list[int], query: str, top_k: int
    ) -> list[SearchResult]:
        async with org_connection(self._pool, caller.org_id, self._gate) as db:
            kbs = PgKnowledgeBaseRepository(db)
            use_case = SearchKnowledgeBase(kbs, PgChunkRepository(db), self._embedders)
            try:
                return await use_case.execute(
                    SearchKnowledgeBaseQuery(
                        caller=caller, kb_ids=list(kb_ids), query=query, top_k=top_k
                    )
                )
            except NotFound:
                # A knowledge base was deleted after the agent was read: search the others.
                remaining = [k for k in kb_ids if await kbs.get(caller.org_id, k) is not None]
                if not remaining:
                    return []
                return await use_case.execute(
                    SearchKnowledgeBaseQuery(
                        caller=caller, kb_ids=list(remaining), query=query, top_k=top_k
                    )
                )


class NoSkillCatalog:
    """The `SkillCatalog` until skills can be created: no skill is active, so agents are
    offered no skill tool. The skills feature replaces it with its repository."""

    async def describe(self, org_id: str, skill_ids: list[int]) -> list[SkillSummary]:
        return []

    async def load(self, org_id: str, skill_id: int) -> str | None:
        return None


class ChatEntry:
    """Runs the chat use cases for a verified identity, each on its own short connection."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        gate: FairGate,
        seen: RecentlySeen,
        clock: Clock,
        streams: ChatStreams,
        tasks: BackgroundTasks,
        runs: ChatRunLog,
        generate: GenerateChatResponse,
    ) -> None:
        self._pool = pool
        self._gate = gate
        self._seen = seen
        self._clock = clock
        self._streams = streams
        self._tasks = tasks
        self._runs = runs
        self._generate = generate

    @asynccontextmanager
    async def _scope(self, identity: Identity) -> AsyncIterator[tuple[Caller, OrgConnection]]:
        caller = identity.as_caller()
        async with org_connection(self._pool, caller.org_id, self._gate) as db:
            record = RecordMemberSeen(PgMemberDirectory(db), db, self._clock)
            await self._seen.provision(identity, lambda: record.execute(identity))
            yield caller, db

    async def send(
        self,
        identity: Identity,
        *,
        agent_id: object,
        messages: object,
        thread_id: object,
        upstream_conversation_id: object,
        title: object,
    ) -> ChatStarted:
        async with self._scope(identity) as (caller, db):
            use_case = SendChatMessage(
                PgAgentRepository(db),
                PgConversationRepository(db),
                PgQueuerJobQueue(db),
                db,
                self._streams,
                self._tasks,
                self._generate,
            )
            return await use_case.execute(
                SendChatMessageCommand(
                    caller=caller,
                    agent_id=agent_id,
                    messages=messages,
                    thread_id=thread_id,
                    upstream_conversation_id=upstream_conversation_id,
                    title=title,
                )
            )

    def stream(self, identity: Identity, started: ChatStarted) -> AsyncIterator[list[Chunk]]:
        return self._streams.follow(identity.as_caller().org_id, started.run_id)

    async def follow(
        self, identity: Identity, thread_id: object
    ) -> AsyncIterator[list[Chunk]] | None:
        async with self._scope(identity) as (caller, db):
            use_case = FollowChatResponse(PgConversationRepository(db), self._streams)
            return await use_case.execute(
                FollowChatResponseQuery(caller=caller, thread_id=thread_id)
            )

    async def cancel(self, identity: Identity, thread_id: object) -> CancelOutcome:
        async with self._scope(identity) as (caller, db):
            use_case = CancelChatResponse(PgConversationRepository(db), db, self._tasks, self._runs)
            return await use_case.execute(
                CancelChatResponseCommand(caller=caller, thread_id=thread_id)
            )


class ChatProvider(Provider):
    """The chat machinery: one set per process."""

    scope = Scope.APP

    @provide
    async def background_tasks(self) -> AsyncIterator[AsyncioBackgroundTasks]:
        tasks = AsyncioBackgroundTasks()
        yield tasks
        # Answers still running record that the server stopped, before the pool closes.
        await tasks.shutdown()

    tasks = alias(source=AsyncioBackgroundTasks, provides=BackgroundTasks)

    @provide
    async def cancel_listener(
        self, database: Database, tasks: AsyncioBackgroundTasks
    ) -> AsyncIterator[PgCancelListener]:
        listener = PgCancelListener(database.url, tasks.cancel)
        await listener.start()
        yield listener
        await listener.stop()

    @provide
    def streams(self, runs: ChatRunLog) -> InProcessChatStreams:
        return InProcessChatStreams(runs)

    chat_streams = alias(source=InProcessChatStreams, provides=ChatStreams)

    @provide
    def knowledge_search(
        self, pool: asyncpg.Pool, gate: FairGate, embedders: EmbedderRegistry
    ) -> KnowledgeSearch:
        return PooledKnowledgeSearch(pool, gate, embedders)

    @provide
    def skills(self) -> SkillCatalog:
        return NoSkillCatalog()

    @provide
    def prices(self, settings: Settings) -> PriceList:
        return PriceList(settings.model_prices)

    @provide
    def generate(
        self,
        models: ChatModelRegistry,
        runs: ChatRunLog,
        search: KnowledgeSearch,
        skills: SkillCatalog,
        ledger: UsageLedger,
        prices: PriceList,
    ) -> GenerateChatResponse:
        return GenerateChatResponse(models, runs, search, skills, ledger, prices)

    @provide
    def entry(
        self,
        listener: PgCancelListener,
        pool: asyncpg.Pool,
        gate: FairGate,
        seen: RecentlySeen,
        clock: Clock,
        streams: ChatStreams,
        tasks: BackgroundTasks,
        runs: ChatRunLog,
        generate: GenerateChatResponse,
    ) -> ChatEntry:
        return ChatEntry(pool, gate, seen, clock, streams, tasks, runs, generate)
