"""The job worker's process: `serve`'s supervised worker child (started and watched by
`entrypoints.worker.supervisor`) and `agent-platform worker` itself, with what a supervised worker
does on its side (stop with its parent, recycle itself when its memory stays high)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import asyncpg
import structlog
import uvloop
from dishka import AsyncContainer

from adapters.background import RECORD_SECONDS, AsyncioBackgroundTasks
from adapters.child_processes import resident_bytes
from adapters.postgres.database import asyncpg_dsn
from adapters.queue.pgqueuer_worker import release_jobs
from entrypoints.config import Settings
from entrypoints.database import Database, resolve_database
from entrypoints.http.shutdown import GracefulServer
from entrypoints.worker.jobs import build_worker
from entrypoints.worker.supervisor import RECYCLE_EXIT, WorkerSupervisor

PARENT_GONE_GRACE = 30.0
# Past its grace, the worker child cuts its answers and records them (`RECORD_SECONDS`) before
# it is killed.
WORKER_RECORD_SECONDS = RECORD_SECONDS + 0.5
RECYCLE_CHECK_SECONDS = 10.0
log = structlog.get_logger("agent_platform.worker")


async def serve_with_worker(
    config: Any, settings: Settings, database: Database, container: AsyncContainer
) -> None:
    """Serve HTTP with `config` (on the embedded default, with the job worker as a supervised
    child) until a stop signal; then stop as `GracefulServer` says, the worker stopping
    alongside the answers (`AP_SHUTDOWN_GRACE` for its jobs in hand), before the app's own
    shutdown stops the model runner and closes the pool."""
    supervisor = None
    if settings.worker_in_process:
        supervisor = WorkerSupervisor(
            _worker_env(database),
            functools.partial(_release_jobs, database.url, settings.database_app_role),
            memory_limit=settings.worker_memory_mb * 2**20,
            stop_timeout=settings.shutdown_grace + WORKER_RECORD_SECONDS,
        )
        supervisor.start()

    async def drain(hurry: asyncio.Event) -> None:
        log.info("shutdown.draining", grace_seconds=settings.shutdown_grace)
        stopping = asyncio.ensure_future(supervisor.stop()) if supervisor else None
        hurrying = asyncio.ensure_future(_hurry_worker(hurry, supervisor))
        try:
            tasks = await container.get(AsyncioBackgroundTasks)
            await tasks.drain(settings.shutdown_grace, hurry)
            if stopping is not None:
                await stopping
        finally:
            hurrying.cancel()
        log.info("shutdown.drained")

    try:
        await GracefulServer(config, drain, settings.shutdown_grace).serve()
    finally:
        if supervisor is not None:
            await supervisor.stop()


async def _hurry_worker(hurry: asyncio.Event, supervisor: WorkerSupervisor | None) -> None:
    await hurry.wait()
    if supervisor is not None:
        supervisor.hurry()


def _worker_env(database: Database) -> dict[str, str]:
    """The worker child's environment: this one, with the database this process resolved (on
    the embedded default, the server it started)."""
    env = dict(os.environ)
    env["AP_DATABASE_URL"] = database.url
    env["AP_DATABASE_MIGRATION_URL"] = database.owner_url
    return env


async def _release_jobs(url: str, app_role: str, worker_id: uuid.UUID) -> int:
    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await connection.execute(f'SET ROLE "{app_role}"')
        return await release_jobs(connection, worker_id)
    finally:
        await connection.close()


def run_worker(settings: Settings, concurrency: int | None) -> int:
    database = resolve_database(settings)
    raw_id = os.environ.get("AP_WORKER_ID")
    worker, container = build_worker(
        settings,
        database,
        concurrency=concurrency,
        warm_up=True,
        worker_id=uuid.UUID(raw_id) if raw_id else None,
    )
    supervised = os.environ.get("AP_WORKER_SUPERVISED") == "1"
    if supervised and settings.worker_nice:
        # Extraction, torch and warm-up saturate the cores; at a lower priority they take
        # only what request handling leaves, so the API answers while a big file goes in.
        os.nice(settings.worker_nice)
    recycled = asyncio.Event()

    async def run() -> None:
        loop = asyncio.get_running_loop()
        hurry = asyncio.Event()
        cutting: list[asyncio.Task[None]] = []

        def stop() -> None:
            """The first signal: take no more jobs, cut the answers still running after the
            grace; a later one: cut them now."""
            worker.stop()
            if cutting:
                hurry.set()
            else:
                cutting.append(loop.create_task(_cut_answers(container, settings, hurry)))

        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop)
        recycling = None
        if supervised:
            _stop_with_parent(loop, stop)
            limit = settings.worker_memory_mb * 2**20
            recycling = asyncio.create_task(_recycle_when_swollen(worker, limit, recycled))
        try:
            await worker.run()
        finally:
            if recycling is not None:
                recycling.cancel()
            for task in cutting:
                task.cancel()
            await container.close()

    uvloop.run(run())
    code = RECYCLE_EXIT if recycled.is_set() else 0
    if supervised:
        # Everything it holds is closed; the interpreter would still wait for the embedder's
        # warm-up thread (loading torch takes seconds), past the server's shutdown bound.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


async def _cut_answers(container: AsyncContainer, settings: Settings, hurry: asyncio.Event) -> None:
    """The answers this worker runs (scheduled runs') go on for the grace, then end recorded
    as cut by the restart, so that the jobs waiting for them end too."""
    tasks = await container.get(AsyncioBackgroundTasks)
    await tasks.drain(settings.shutdown_grace, hurry)


async def _recycle_when_swollen(worker: Any, limit: int, recycled: asyncio.Event) -> None:
    """Stop a supervised worker whose memory stays above `limit` while it holds no job: its
    supervisor starts a fresh one, which gives back what a parser or allocator kept."""
    while True:
        await asyncio.sleep(RECYCLE_CHECK_SECONDS)
        resident = resident_bytes(os.getpid())
        if worker.jobs_in_hand == 0 and resident is not None and resident > limit:
            log.warning("worker.recycling", resident_mb=resident // 2**20, limit_mb=limit // 2**20)
            recycled.set()
            worker.stop()
            return


def _stop_with_parent(loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> None:
    """Stop when the supervising server is gone: it holds the other end of our standard
    input, which closes however it ends (SIGKILL included). The jobs in hand get
    `PARENT_GONE_GRACE` seconds, then the process exits."""

    def watch() -> None:
        # os.read, not sys.stdin: a daemon thread blocked in a buffered read holds its lock,
        # and the interpreter aborts ("could not acquire lock") when it finalizes meanwhile.
        with contextlib.suppress(OSError):
            while os.read(0, 4096):
                pass
        loop.call_soon_threadsafe(stop)
        time.sleep(PARENT_GONE_GRACE)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
