"""Runs queued jobs with pgqueuer.

A failing job is re-queued in the database with exponential backoff (`RetryRequested`), so
retries survive restarts; its handler is told when an attempt is the last one, so that it can
leave its data in a named failure state instead of failing again. A job whose worker dies
keeps no heartbeat and is picked up again by another worker. A reaper runs periodically.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import asyncpg
import structlog
from pgqueuer import QueueManager
from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
from pgqueuer.errors import RetryRequested
from pgqueuer.models import Job
from pgqueuer.queries import Queries

from adapters.postgres.database import asyncpg_dsn

JobHandler = Callable[[dict[str, Any], bool], Awaitable[None]]
"""Runs one job: its JSON payload, and whether this is its last attempt."""

log = structlog.get_logger("agent_platform.worker")


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    max_attempts: int = 5
    initial_delay: timedelta = timedelta(seconds=2)
    max_delay: timedelta = timedelta(minutes=5)
    multiplier: float = 2.0

    def delay(self, attempts: int) -> timedelta:
        return min(self.initial_delay * (self.multiplier**attempts), self.max_delay)


class PgQueuerWorker:
    """Consumes the job kinds in `handlers`, at most `concurrency` at a time."""

    def __init__(
        self,
        url: str,
        handlers: Mapping[str, JobHandler],
        *,
        app_role: str | None,
        concurrency: int = 2,
        retry: RetryPolicy | None = None,
        heartbeat_timeout: timedelta = timedelta(seconds=30),
        reaper: Callable[[], Awaitable[int]] | None = None,
        reap_every: timedelta = timedelta(minutes=1),
        on_start: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._url = url
        self._handlers = dict(handlers)
        self._app_role = app_role
        self._concurrency = max(1, concurrency)
        self._retry = retry or RetryPolicy()
        self._heartbeat_timeout = heartbeat_timeout
        self._reaper = reaper
        self._reap_every = reap_every
        self._on_start = on_start
        self._manager: QueueManager | None = None
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        """Finish the jobs in hand and return from `run`."""
        self._stopping.set()
        if self._manager is not None:
            self._manager.shutdown.set()

    async def run(self) -> None:
        connection = await asyncpg.connect(asyncpg_dsn(self._url))
        if self._app_role:
            await connection.execute(f'SET ROLE "{self._app_role}"')
        manager = QueueManager(Queries(AsyncpgDriver(connection)))
        self._manager = manager
        slots = asyncio.Semaphore(self._concurrency)
        for kind, handler in self._handlers.items():
            manager.entrypoint(kind)(self._dispatcher(kind, handler, slots))
        reaping = asyncio.create_task(self._reap_periodically()) if self._reaper else None
        starting = asyncio.create_task(self._start_in_background()) if self._on_start else None
        log.info("worker.started", kinds=sorted(self._handlers), concurrency=self._concurrency)
        try:
            if self._stopping.is_set():
                return
            await manager.run(
                batch_size=1,
                max_concurrent_tasks=max(2, self._concurrency),
                heartbeat_timeout=self._heartbeat_timeout,
                dequeue_timeout=timedelta(seconds=5),
            )
        finally:
            if starting:
                starting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await starting
            if reaping:
                reaping.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reaping
            await connection.close()
            log.info("worker.stopped")

    def _dispatcher(
        self, kind: str, handler: JobHandler, slots: asyncio.Semaphore
    ) -> Callable[[Job], Awaitable[None]]:
        retry = self._retry

        async def dispatch(job: Job) -> None:
            payload = json.loads(job.payload or b"{}")
            last = job.attempts + 1 >= retry.max_attempts
            async with slots:
                try:
                    await handler(payload, last)
                except Exception as error:
                    if last:
                        log.exception("job.failed", kind=kind, job_id=job.id, attempt=job.attempts)
                        return
                    delay = retry.delay(job.attempts)
                    log.warning(
                        "job.retrying",
                        kind=kind,
                        job_id=job.id,
                        attempt=job.attempts,
                        delay_s=delay.total_seconds(),
                        error=type(error).__name__,
                    )
                    raise RetryRequested(delay=delay, reason=type(error).__name__) from error

        return dispatch

    async def _start_in_background(self) -> None:
        """`on_start` beside the first jobs rather than before them (it may take seconds)."""
        assert self._on_start is not None
        try:
            await self._on_start()
        except Exception:  # a failed warm-up only means the first job does that work itself
            log.exception("worker.on_start_failed")
        else:
            log.info("worker.warmed_up")

    async def _reap_periodically(self) -> None:
        assert self._reaper is not None
        while not self._stopping.is_set():
            try:
                reaped = await self._reaper()
                if reaped:
                    log.warning("worker.reaped_stalled_files", count=reaped)
            except Exception:  # the reaper must not stop the worker
                log.exception("worker.reaper_failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._reap_every.total_seconds())
