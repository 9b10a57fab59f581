"""The job worker: the same container as the HTTP app, one request scope per job, acting in
the job's organization.

How many runs cut short (by a dying process) each kind survives: a title gives up after one
(the fallback title stays); a re-embedding after `max_cut_short_runs`, abandoned as a failed
one is (the old index stays, the knowledge base shows `error`); files and their parts count
their own runs and fail after `ProcessingLimits.max_runs`, so the queue's cap is only a
backstop above theirs, past which the reaper fails a file left without a job.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import Any

import asyncpg
import structlog
from dishka import AsyncContainer, Provider

from adapters.embeddings.local import LocalSentenceTransformerEmbedder
from adapters.postgres.database import asyncpg_dsn
from adapters.postgres.vector_indexes import keep_vector_indexes, owns_chunks
from adapters.postgres.webhook_receipts import prune_webhook_receipts
from adapters.queue.pgqueuer_worker import (
    JobHandler,
    JobKind,
    JobRun,
    PgQueuerWorker,
    RetryPolicy,
)
from application.metering import SpendMeter
from application.ports.embedder import EmbedderRegistry
from application.ports.job_queue import (
    EMBED_FILE_PART,
    GENERATE_TITLE,
    PROCESS_FILE,
    PURGE_DELETED_UPLOAD,
    REEMBED_KNOWLEDGE_BASE,
    RUN_SCHEDULED_TASK,
)
from application.use_cases.embed_file_part import EmbedFilePart, EmbedFilePartCommand
from application.use_cases.execute_scheduled_run import (
    ExecuteScheduledRunCommand,
    FinishScheduledRun,
)
from application.use_cases.generate_conversation_title import (
    GenerateConversationTitle,
    GenerateConversationTitleCommand,
)
from application.use_cases.process_file import ProcessFile, ProcessFileCommand, ProcessingLimits
from application.use_cases.purge_deleted_upload import (
    PurgeDeletedUpload,
    PurgeDeletedUploadCommand,
)
from application.use_cases.reembed_knowledge_base import (
    ReembedKnowledgeBase,
    ReembedKnowledgeBaseCommand,
)
from domain.identity import ADMIN_ROLE, Identity
from domain.models import KNOWN_EMBEDDING_DIMENSIONS
from entrypoints.config import Settings
from entrypoints.database import Database
from entrypoints.wiring import make_container
from entrypoints.worker.scheduler import claim_due_tasks, run_scheduled_task

WORKER_USER = "system:worker"
STALLED_AFTER = timedelta(minutes=2)
# Answers send a heartbeat every 10 s while they run; six missed ones mean their process died.
CHAT_STALLED_AFTER = timedelta(seconds=60)
# A call settles the moment its answer is stored; one of an ended answer still reserved this long
# after it began lost its process, and the reaper charges an estimate of it.
ABANDONED_AFTER = timedelta(seconds=30)
# Longer than the identity provider retries a webhook message (Svix: about 28 hours), so that a
# retry is still known as one; older receipts are dropped by the reaper.
WEBHOOK_RECEIPTS_KEPT = timedelta(days=7)
TITLE_MAX_CUT_SHORT_RUNS = 1
# A run waits for its answer (at most a few model calls of `AP_CHAT_TIMEOUT` each); one still
# `running` this long lost its worker.
SCHEDULED_RUN_STALLED_AFTER = timedelta(minutes=30)
# Not again and again: a run cut short twice (its worker died) is failed.
SCHEDULED_RUN_MAX_CUT_SHORT_RUNS = 2
NOT_OWNER_HINT = (
    "the worker's database role does not own the chunks table, so large knowledge bases get no "
    "vector index of their own; give the worker AP_DATABASE_MIGRATION_URL"
)

log = structlog.get_logger("agent_platform.worker")


def vector_indexer(settings: Settings, database: Database) -> Callable[[], Awaitable[int]]:
    """The worker's periodic sweep of the knowledge bases' own vector indexes, as the schema
    owner (vector_indexes.py); the number of indexes built or dropped."""
    warned: list[bool] = []

    async def keep_indexes() -> int:
        connection = await asyncpg.connect(asyncpg_dsn(database.owner_url))
        try:
            # A worker stopped mid-build must not leave its backend building for minutes.
            await connection.execute("SET client_connection_check_interval = '5s'")
            if not await owns_chunks(connection):
                if not warned:
                    log.warning("vector_index.not_owner", hint=NOT_OWNER_HINT)
                    warned.append(True)
                return 0
            sweep = await keep_vector_indexes(
                connection,
                min_passages=settings.vector_index_min_passages,
                build_memory=f"{settings.vector_index_memory_mb}MB",
            )
            return sweep.changes
        finally:
            await connection.close()

    return keep_indexes


def build_worker(
    settings: Settings,
    database: Database,
    *providers: Provider,
    concurrency: int | None = None,
    retry: RetryPolicy | None = None,
    heartbeat_timeout: timedelta | None = None,
    warm_up: bool = False,
    worker_id: uuid.UUID | None = None,
    max_cut_short_runs: int | None = None,
) -> tuple[PgQueuerWorker, AsyncContainer]:
    """A worker and its container (close the container after the worker stops). With
    `warm_up`, the default local embedding model loads as the worker starts. `worker_id` is
    its queue manager id (for `release_jobs` once it is dead); `max_cut_short_runs` is how many
    cut-short runs a re-embedding survives (default `AP_JOB_MAX_CUT_SHORT_RUNS`)."""
    workers = concurrency or settings.worker_concurrency
    if max_cut_short_runs is None:
        max_cut_short_runs = settings.job_max_cut_short_runs
    # The worker's own pool: one connection per job in hand, one for the reaper.
    sized = dataclasses.replace(settings, database_pool_size=workers + 1)
    container = make_container(sized, database, *providers)

    def in_organization(payload: dict[str, Any]) -> AbstractAsyncContextManager[AsyncContainer]:
        """A job acts as the system in the organization its payload names."""
        identity = Identity(user_id=WORKER_USER, org_id=str(payload["orgId"]), role=ADMIN_ROLE)
        return container(context={Identity: identity})

    def handler(
        use_case: type[Any], command: Callable[[dict[str, Any], JobRun], object]
    ) -> JobHandler:
        """Runs `use_case` with the command built from a job's payload, in its organization."""

        async def handle(payload: dict[str, Any], run: JobRun) -> None:
            async with in_organization(payload) as request:
                await (await request.get(use_case)).execute(command(payload, run))

        return handle

    def reembed_command(payload: dict[str, Any], run: JobRun) -> ReembedKnowledgeBaseCommand:
        return ReembedKnowledgeBaseCommand(
            org_id=str(payload["orgId"]), kb_id=int(payload["kbId"]), last_attempt=run.last_attempt
        )

    async def abandon_reembedding(payload: dict[str, Any], run: JobRun) -> None:
        async with in_organization(payload) as request:
            await (await request.get(ReembedKnowledgeBase)).give_up(reembed_command(payload, run))

    async def keep_fallback_title(payload: dict[str, Any], run: JobRun) -> None:
        log.warning(
            "title.given_up",
            org_id=payload.get("orgId"),
            thread_id=payload.get("threadId"),
            cut_short_runs=run.cut_short_runs,
        )

    async def fail_scheduled_run(payload: dict[str, Any], _run: JobRun) -> None:
        command = ExecuteScheduledRunCommand(
            org_id=str(payload["orgId"]), run_id=str(payload["runId"])
        )
        async with in_organization(payload) as request:
            await (await request.get(FinishScheduledRun)).give_up(command)

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
            runs += await connection.fetch(
                "SELECT * FROM ap_reap_stalled_scheduled_runs($1)", SCHEDULED_RUN_STALLED_AFTER
            )
            await prune_webhook_receipts(connection, WEBHOOK_RECEIPTS_KEPT)
        # After the stalled runs are failed: their calls' reservations are then abandoned.
        settled = await (await container.get(SpendMeter)).settle_abandoned(ABANDONED_AFTER)
        return len(rows) + len(runs) + settled

    # Above the use cases' own count of runs, which fails the file first.
    file_backstop = max(max_cut_short_runs, ProcessingLimits().max_runs + 1)
    worker = PgQueuerWorker(
        database.url,
        {
            PROCESS_FILE: JobKind(
                handler=handler(
                    ProcessFile,
                    lambda p, run: ProcessFileCommand(
                        org_id=str(p["orgId"]),
                        file_record_id=int(p["fileRecordId"]),
                        last_attempt=run.last_attempt,
                    ),
                ),
                max_cut_short_runs=file_backstop,
            ),
            EMBED_FILE_PART: JobKind(
                handler=handler(
                    EmbedFilePart,
                    lambda p, run: EmbedFilePartCommand(
                        org_id=str(p["orgId"]),
                        file_record_id=int(p["fileRecordId"]),
                        part_id=int(p["partId"]),
                        last_attempt=run.last_attempt,
                    ),
                ),
                max_cut_short_runs=file_backstop,
            ),
            REEMBED_KNOWLEDGE_BASE: JobKind(
                handler=handler(ReembedKnowledgeBase, reembed_command),
                give_up=abandon_reembedding,
                max_cut_short_runs=max_cut_short_runs,
            ),
            RUN_SCHEDULED_TASK: JobKind(
                handler=lambda p, _run: run_scheduled_task(container, in_organization, p),
                give_up=fail_scheduled_run,
                max_cut_short_runs=SCHEDULED_RUN_MAX_CUT_SHORT_RUNS,
            ),
            PURGE_DELETED_UPLOAD: JobKind(
                handler=handler(
                    PurgeDeletedUpload,
                    lambda p, _run: PurgeDeletedUploadCommand(
                        org_id=str(p["orgId"]), file_id=str(p["fileId"])
                    ),
                ),
                max_cut_short_runs=max_cut_short_runs,
            ),
            GENERATE_TITLE: JobKind(
                handler=handler(
                    GenerateConversationTitle,
                    lambda p, _run: GenerateConversationTitleCommand(
                        org_id=str(p["orgId"]),
                        thread_id=str(p["threadId"]),
                        title_version=int(p["titleVersion"]),
                    ),
                ),
                give_up=keep_fallback_title,
                max_cut_short_runs=TITLE_MAX_CUT_SHORT_RUNS,
            ),
        },
        app_role=settings.database_app_role,
        concurrency=workers,
        retry=retry,
        heartbeat_timeout=heartbeat_timeout or timedelta(seconds=settings.worker_heartbeat_timeout),
        reaper=reap,
        indexer=vector_indexer(settings, database),
        ticker=lambda: claim_due_tasks(container, in_organization),
        on_start=load_default_embedder if warm_up else None,
        worker_id=worker_id,
    )
    return worker, container
