"""Chat: the answer machinery for the process's life (background tasks, the cancel listener,
live streams, the answer generator and what it searches and loads), and the chat use cases per
organization scope.

A streaming answer can last minutes, and the HTTP integration's request scope lives as long as
the response, so a use case resolved from it would hold its pooled connection for the whole
stream; a hundred open streams would starve the pool. The chat routes therefore open a short
child scope of the app container (`OrgScopes.acting_as`) for the use case alone, which returns
its connection before the first byte of the stream. The answer that outlives the request
searches knowledge bases the same way, one short scope per search.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import replace

from dishka import AsyncContainer, Provider, Scope, alias, provide, provide_all

from adapters.background import AsyncioBackgroundTasks
from adapters.chat.run_streams import InProcessChatStreams
from adapters.postgres.cancel_listener import PgCancelListener
from application.agent.inline_skills import InlineSkills
from application.metering import SpendMeter
from application.ports.background_tasks import BackgroundTasks
from application.ports.chat_model import ChatModelRegistry
from application.ports.chat_run_log import ChatRunLog
from application.ports.chat_streams import ChatStreams
from application.ports.clock import Clock
from application.ports.knowledge_search import KnowledgeSearch
from application.ports.secret_box import SecretBox
from application.ports.skill_catalog import (
    LoadedSkill,
    SkillCatalog,
    SkillFileContent,
    SkillSummary,
)
from application.ports.tool_connector import ToolConnector
from application.tool_discovery import ToolServerSessions
from application.tools.knowledge_search import KnowledgeSearchTool
from application.tools.load_skill import LoadSkillTool
from application.tools.read_skill_file import ReadSkillFileTool
from application.tools.registry import ToolRegistry
from application.tools.server_tools import ServerTools
from application.tools.skill_library import SkillLibrary
from application.use_cases.answer_tool_approval import AnswerToolApproval
from application.use_cases.cancel_chat_response import CancelChatResponse
from application.use_cases.follow_chat_response import FollowChatResponse
from application.use_cases.generate_chat_response import GenerateChatResponse
from application.use_cases.search_knowledge_base import (
    SearchKnowledgeBase,
    SearchKnowledgeBaseQuery,
)
from application.use_cases.send_chat_message import SendChatMessage
from domain.chunks import SearchResult
from domain.identity import Caller, Identity
from domain.search import Filter
from entrypoints.config import Settings
from entrypoints.database import Database


class OrgScopes:
    """Opens a short scope of the app container acting as an identity: its own
    organization-scoped connection, returned when the scope closes."""

    def __init__(self, container: AsyncContainer) -> None:
        self._container = container

    def acting_as(self, identity: Identity) -> AbstractAsyncContextManager[AsyncContainer]:
        return self._container(context={Identity: identity})

    def acting_for(self, caller: Caller) -> AbstractAsyncContextManager[AsyncContainer]:
        """The scope of work done for a member outside their request (their answer)."""
        return self.acting_as(
            Identity(
                user_id=caller.user_id,
                org_id=caller.org_id,
                role=caller.role,
                permissions=caller.permissions,
            )
        )


class ScopedKnowledgeSearch:
    """`KnowledgeSearch` through `SearchKnowledgeBase`, each search in its own short scope."""

    def __init__(self, scopes: OrgScopes) -> None:
        self._scopes = scopes

    async def search(
        self,
        caller: Caller,
        kb_ids: list[int],
        query: str,
        top_k: int,
        *,
        filters: Filter | None = None,
    ) -> list[SearchResult]:
        async with self._scopes.acting_for(caller) as scope:
            parsed = SearchKnowledgeBaseQuery.parse(
                caller=caller, kb_ids=list(kb_ids), query=query, top_k=top_k, skip_missing=True
            )
            use_case = await scope.get(SearchKnowledgeBase)
            answer = await use_case.execute(replace(parsed, filters=filters))
            return answer.results


class ScopedSkillCatalog:
    """`SkillCatalog` through `SkillLibrary`, each read in its own short scope."""

    def __init__(self, scopes: OrgScopes) -> None:
        self._scopes = scopes

    async def describe(self, caller: Caller, skill_ids: list[int]) -> list[SkillSummary]:
        async with self._scopes.acting_for(caller) as scope:
            return await (await scope.get(SkillLibrary)).describe(caller, skill_ids)

    async def load(self, caller: Caller, skill_id: int) -> LoadedSkill | None:
        async with self._scopes.acting_for(caller) as scope:
            return await (await scope.get(SkillLibrary)).load(caller, skill_id)

    async def read_file(
        self, caller: Caller, skill_id: int, path: str, *, max_bytes: int | None = None
    ) -> SkillFileContent | None:
        async with self._scopes.acting_for(caller) as scope:
            library = await scope.get(SkillLibrary)
            return await library.read_file(caller, skill_id, path, max_bytes=max_bytes)


class ChatProvider(Provider):
    """Everything behind `/chat`."""

    scope = Scope.APP

    chat_streams = alias(source=InProcessChatStreams, provides=ChatStreams)
    tasks = alias(source=AsyncioBackgroundTasks, provides=BackgroundTasks)
    org_scopes = provide(OrgScopes)
    knowledge_search = provide(ScopedKnowledgeSearch, provides=KnowledgeSearch)
    skills = provide(ScopedSkillCatalog, provides=SkillCatalog)
    skill_library = provide(SkillLibrary, scope=Scope.REQUEST)
    use_cases = provide_all(
        SendChatMessage,
        FollowChatResponse,
        CancelChatResponse,
        AnswerToolApproval,
        scope=Scope.REQUEST,
    )

    @provide
    def streams(self, runs: ChatRunLog) -> InProcessChatStreams:
        return InProcessChatStreams(runs)

    @provide
    async def background_tasks(self) -> AsyncIterator[AsyncioBackgroundTasks]:
        tasks = AsyncioBackgroundTasks()
        yield tasks
        # Answers still running record that the server stopped, before the pool closes.
        await tasks.shutdown()

    @provide
    async def cancel_listener(
        self, database: Database, tasks: AsyncioBackgroundTasks
    ) -> AsyncIterator[PgCancelListener]:
        """Started with the app (its start-up resolves it), so that a cancel sent to another
        process reaches the one producing the answer."""
        listener = PgCancelListener(database.url, tasks.cancel)
        await listener.start()
        yield listener
        await listener.stop()

    @provide
    def tools(
        self,
        search: KnowledgeSearch,
        skills: SkillCatalog,
        scopes: OrgScopes,
        secrets: SecretBox,
        connector: ToolConnector,
        sessions: ToolServerSessions,
        settings: Settings,
    ) -> ToolRegistry:
        # The order here is the order the tools are offered to the model.
        return ToolRegistry(
            [
                KnowledgeSearchTool(search),
                LoadSkillTool(skills),
                ReadSkillFileTool(skills),
                ServerTools(
                    sessions,
                    secrets,
                    connector,
                    max_offered=settings.tools.max_offered,
                ),
            ]
        )

    @provide
    def generate(
        self,
        models: ChatModelRegistry,
        runs: ChatRunLog,
        search: KnowledgeSearch,
        tools: ToolRegistry,
        skills: SkillCatalog,
        meter: SpendMeter,
        settings: Settings,
        clock: Clock,
    ) -> GenerateChatResponse:
        return GenerateChatResponse(
            models,
            runs,
            search,
            tools,
            InlineSkills(skills),
            meter,
            max_output_tokens=settings.chat_max_output_tokens,
            approval_ttl=settings.tools.approval_ttl,
            clock=clock,
        )
