"""The job worker: the same container as the HTTP app, one request scope per job, acting in
the job's organization."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import Any

import asyncpg
from dishka import AsyncContainer, Provider, Scope, from_context

from adapters.embeddings.local import LocalSentenceTransformerEmbedder
from adapters.queue.worker import PgQueuerWorker, RetryPolicy
from application.ports.embedder import EmbedderRegistry
from application.ports.job_queue import (
    EMBED_FILE_PART,
    GENERATE_TITLE,
    PROCESS_FILE,
    REEMBED_KNOWLEDGE_BASE,
)
from application.use_cases.embed_file_part import EmbedFilePart, EmbedFilePartCommand
from application.use_cases.generate_conversation_title import (
    GenerateConversationTitle,
    GenerateConversationTitleCommand,
)
from application.use_cases.process_file import ProcessFile, ProcessFileCommand
from application.use_cases.reembed_knowledge_base import (
    ReembedKnowledgeBase,
    ReembedKnowledgeBaseCommand,
)
from domain.identity import ADMIN_ROLE, Identity
from domain.models import KNOWN_EMBEDDING_DIMENSIONS
from entrypoints.config import Settings
from entrypoints.container import make_container
from entrypoints.database import Database
from entrypoints.title_providers import TitleProvider

WORKER_USER = "system:worker"
STALLED_AFTER = timedelta(minutes=2)
# Answers send a heartbeat every 10 s while they run; six missed ones mean their process died.
CHAT_STALLED_AFTER = timedelta(seconds=60)


class JobIdentityProvider(Provider):
    """A job acts as the system in the organization its payload names."""

    identity = from_context(Identity, scope=Scope.REQUEST)


def build_worker(
    settings: Settings,
    database: Database,
    *providers: Provider,
    concurrency: int | None = None,
    retry: RetryPolicy | None = None,
    heartbeat_timeout: timedelta | None = None,
    warm_up: bool = False,
) -> tuple[PgQueuerWorker, AsyncContainer]:
    """A worker and its container (close the container after the worker stops). With
    `warm_up`, the default local embedding model loads as the worker starts."""
    workers = concurrency or settings.worker_concurrency
    # The worker's own pool: one connection per job in hand, one for the reaper.
    sized = dataclasses.replace(settings, database_pool_size=workers + 1)
    container = make_container(sized, database, JobIdentityProvider(), TitleProvider(), *providers)

    def in_organization(payload: dict[str, Any]) -> AbstractAsyncContextManager[AsyncContainer]:
        identity = Identity(user_id=WORKER_USER, org_id=str(payload["orgId"]), role=ADMIN_ROLE)
        return container(context={Identity: identity})

    def handler(
        use_case: type[Any], command: Callable[[dict[str, Any], bool], object]
    ) -> Callable[[dict[str, Any], bool], Awaitable[None]]:
        """Runs `use_case` with the command built from a job's payload, in its organization."""

        async def handle(payload: dict[str, Any], last_attempt: bool) -> None:
            async with in_organization(payload) as request:
                await (await request.get(use_case)).execute(command(payload, last_attempt))

        return handle

    async def load_default_embedder() -> None:
        model = settings.default_embedding_model
        dimensions = KNOWN_EMBEDDING_DIMENSIONS.get(model)
        if dimensions is None:
            return
        embedder = (await container.get(EmbedderRegistry)).get(model, dimensions)
        if isinstance(embedder, LocalSentenceTransformerEmbedder):
            await embedder.warm_up()

    async def reap() -> int:
        pool = await container.get(asyncpg.Pool)
        async with pool.acquire() as connection:
            rows = await connection.fetch("SELECT * FROM ap_reap_stalled_files($1)", STALLED_AFTER)
            runs = await connection.fetch(
                "SELECT * FROM ap_reap_stalled_chat_runs($1)", CHAT_STALLED_AFTER
            )
        return len(rows) + len(runs)

    worker = PgQueuerWorker(
        database.url,
        {
            PROCESS_FILE: handler(
                ProcessFile,
                lambda p, last: ProcessFileCommand(
                    org_id=str(p["orgId"]),
                    file_record_id=int(p["fileRecordId"]),
                    last_attempt=last,
                ),
            ),
            EMBED_FILE_PART: handler(
                EmbedFilePart,
                lambda p, last: EmbedFilePartCommand(
                    org_id=str(p["orgId"]),
                    file_record_id=int(p["fileRecordId"]),
                    part_id=int(p["partId"]),
                    last_attempt=last,
                ),
            ),
            REEMBED_KNOWLEDGE_BASE: handler(
                ReembedKnowledgeBase,
                lambda p, last: ReembedKnowledgeBaseCommand(
                    org_id=str(p["orgId"]), kb_id=int(p["kbId"]), last_attempt=last
                ),
            ),
            GENERATE_TITLE: handler(
                GenerateConversationTitle,
                lambda p, _last: GenerateConversationTitleCommand(
                    org_id=str(p["orgId"]),
                    thread_id=str(p["threadId"]),
                    title_version=int(p["titleVersion"]),
                ),
            ),
        },
        app_role=settings.database_app_role,
        concurrency=workers,
        retry=retry,
        heartbeat_timeout=heartbeat_timeout or timedelta(seconds=settings.worker_heartbeat_timeout),
        reaper=reap,
        on_start=load_default_embedder if warm_up else None,
    )
    return worker, container
