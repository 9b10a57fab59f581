"""Runs queued jobs with pgqueuer.

A failing job is re-queued in the database with exponential backoff (`RetryRequested`), so
retries survive restarts; its handler is told when an attempt is the last one, so that it can
leave its data in a named failure state instead of failing again. A job whose worker dies
keeps no heartbeat and is picked up again by another worker, or at once when the dead worker's
supervisor calls `release_jobs`. A reaper, a ticker (the scheduler's) and an indexer (the
knowledge bases' own vector indexes) run periodically, each in a task of its own.

Every run of a job is counted in `pgqueuer_job_runs`: a start, committed before the handler
runs, and an end when it returns or raises. A start without an end is a run cut short: its
process died, maybe because of the job itself. The handler is told how many earlier runs were
cut short; once they reach its kind's cap, the handler is not run again (it could bring down
one process after another): the kind's give-up hook leaves the job's data in its failure state
and the job ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
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
from pgqueuer.types import QueueManagerId

from adapters.postgres.database import asyncpg_dsn

log = structlog.get_logger("agent_platform.worker")

DEFAULT_MAX_CUT_SHORT_RUNS = 3
"""How many cut-short runs a job survives when its kind names no cap of its own."""

_BEGIN_RUN = """
    INSERT INTO pgqueuer_job_runs AS r (job_id, started) VALUES ($1, 1)
    ON CONFLICT (job_id) DO UPDATE SET started = r.started + 1, updated_at = now()
    RETURNING r.started - 1 - r.ended AS cut_short
"""
_END_RUN = "UPDATE pgqueuer_job_runs SET ended = ended + 1, updated_at = now() WHERE job_id = $1"
# A heartbeat older than any timeout: the next dequeue of any worker takes the job over, and
# the update's notification wakes the idle ones at once.
_RELEASE = """
    UPDATE pgqueuer SET heartbeat = 'epoch', updated = now()
    WHERE queue_manager_id = $1 AND status = 'picked'
    RETURNING id
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRun:
    """One run of a job, as its handler sees it: `attempt` counts the earlier failed attempts
    (retried with backoff), `cut_short_runs` the earlier runs that never ended (their process
    died)."""

    job_id: int
    attempt: int
    last_attempt: bool
    cut_short_runs: int


JobHandler = Callable[[dict[str, Any], JobRun], Awaitable[None]]
"""Runs one job: its JSON payload, and what is known of this run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobKind:
    """How a kind of job is run: its handler while fewer than `max_cut_short_runs` of the
    job's runs were cut short, then once `give_up` (which leaves the job's data in its failure
    state) instead; without a hook, or when giving up was cut short too, the job is dropped.
    A failing give-up is retried like a failing handler."""

    handler: JobHandler
    give_up: JobHandler | None = None
    max_cut_short_runs: int = DEFAULT_MAX_CUT_SHORT_RUNS


async def release_jobs(connection: asyncpg.Connection, worker_id: uuid.UUID) -> int:
    """Hand the jobs held by the worker `worker_id`, which must be dead, to the other workers
    at once rather than after the heartbeat timeout; how many. A run it had begun stays
    started and never ended, so the next run counts it as cut short."""
    rows = await connection.fetch(_RELEASE, worker_id)
    if rows:
        log.warning("worker.jobs_released", worker_id=str(worker_id), job_ids=[r[0] for r in rows])
    return len(rows)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    max_attempts: int = 5
    initial_delay: timedelta = timedelta(seconds=2)
    max_delay: timedelta = timedelta(minutes=5)
    multiplier: float = 2.0

    def delay(self, attempts: int) -> timedelta:
        return min(self.initial_delay * (self.multiplier**attempts), self.max_delay)


class PgQueuerWorker:
    """Consumes the job kinds in `kinds`, at most `concurrency` at a time, as the queue manager
    `worker_id` (random unless given; a supervisor gives one to release a dead worker's jobs)."""

    def __init__(
        self,
        url: str,
        kinds: Mapping[str, JobKind],
        *,
        app_role: str | None,
        concurrency: int = 2,
        retry: RetryPolicy | None = None,
        heartbeat_timeout: timedelta = timedelta(seconds=30),
        reaper: Callable[[], Awaitable[int]] | None = None,
        reap_every: timedelta = timedelta(minutes=1),
        ticker: Callable[[], Awaitable[int]] | None = None,
        tick_every: timedelta = timedelta(seconds=10),
        indexer: Callable[[], Awaitable[int]] | None = None,
        index_every: timedelta = timedelta(minutes=1),
        on_start: Callable[[], Awaitable[None]] | None = None,
        worker_id: uuid.UUID | None = None,
    ) -> None:
        self.worker_id = worker_id or uuid.uuid4()
        self._url = url
        self._kinds = dict(kinds)
        self._app_role = app_role
        self._concurrency = max(1, concurrency)
        self._retry = retry or RetryPolicy()
        self._heartbeat_timeout = heartbeat_timeout
        self._reaper = reaper
        self._reap_every = reap_every
        self._ticker = ticker
        self._tick_every = tick_every
        self._indexer = indexer
        self._index_every = index_every
        self._on_start = on_start
        self._manager: QueueManager | None = None
        self._driver: AsyncpgDriver | None = None
        self._stopping = asyncio.Event()
        self._in_hand = 0

    @property
    def jobs_in_hand(self) -> int:
        """Jobs this worker is running now."""
        return self._in_hand

    def stop(self) -> None:
        """Finish the jobs in hand and return from `run`."""
        self._stopping.set()
        if self._manager is not None:
            self._manager.shutdown.set()

    async def run(self) -> None:
        connection = await asyncpg.connect(asyncpg_dsn(self._url))
        if self._app_role:
            await connection.execute(f'SET ROLE "{self._app_role}"')
        # The runs are counted through pgqueuer's driver, whose lock serializes the connection.
        self._driver = AsyncpgDriver(connection)
        manager = QueueManager(Queries(self._driver))
        manager.queue_manager_id = QueueManagerId(self.worker_id)
        self._manager = manager
        slots = asyncio.Semaphore(self._concurrency)
        for name, kind in self._kinds.items():
            manager.entrypoint(name)(self._dispatcher(name, kind, slots))
        periodic = [
            asyncio.create_task(self._every(work, interval, what))
            for work, interval, what in (
                (self._reaper, self._reap_every, "worker.reaped_stalled_work"),
                (self._ticker, self._tick_every, "worker.ticked"),
                (self._indexer, self._index_every, "worker.vector_indexes_changed"),
            )
            if work is not None
        ]
        starting = asyncio.create_task(self._start_in_background()) if self._on_start else None
        log.info(
            "worker.started",
            kinds=sorted(self._kinds),
            concurrency=self._concurrency,
            worker_id=str(self.worker_id),
        )
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
            for task in periodic:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await connection.close()
            log.info("worker.stopped")

    def _dispatcher(
        self, name: str, kind: JobKind, slots: asyncio.Semaphore
    ) -> Callable[[Job], Awaitable[None]]:
        retry = self._retry

        async def dispatch(job: Job) -> None:
            payload = json.loads(job.payload or b"{}")
            last = job.attempts + 1 >= retry.max_attempts
            async with slots:
                self._in_hand += 1
                try:
                    await self._attempt(name, kind, job, payload, last)
                finally:
                    self._in_hand -= 1

        return dispatch

    async def _attempt(
        self, name: str, kind: JobKind, job: Job, payload: dict[str, Any], last: bool
    ) -> None:
        """One run of `job`, counted; a failure is retried with backoff unless it was the
        last attempt."""
        begun = False
        try:
            cut_short = await self._begin_run(job.id)
            begun = True
            run = JobRun(
                job_id=job.id,
                attempt=job.attempts,
                last_attempt=last,
                cut_short_runs=cut_short,
            )
            await self._run(name, kind, payload, run)
        except Exception as error:
            if begun:
                await self._end_run(job.id)
            if last:
                log.exception("job.failed", kind=name, job_id=job.id, attempt=job.attempts)
                return
            delay = self._retry.delay(job.attempts)
            log.warning(
                "job.retrying",
                kind=name,
                job_id=job.id,
                attempt=job.attempts,
                delay_s=delay.total_seconds(),
                error=type(error).__name__,
            )
            raise RetryRequested(delay=delay, reason=type(error).__name__) from error
        await self._end_run(job.id)

    @staticmethod
    async def _run(name: str, kind: JobKind, payload: dict[str, Any], run: JobRun) -> None:
        """The handler, the give-up hook, or nothing, by how many runs were cut short."""
        cut_short = run.cut_short_runs
        if cut_short < kind.max_cut_short_runs:
            await kind.handler(payload, run)
        elif cut_short == kind.max_cut_short_runs and kind.give_up is not None:
            log.warning("job.giving_up", kind=name, job_id=run.job_id, cut_short_runs=cut_short)
            await kind.give_up(payload, run)
        else:
            log.error("job.dropped", kind=name, job_id=run.job_id, cut_short_runs=cut_short)

    async def _begin_run(self, job_id: int) -> int:
        """Count a start of the job; how many of its earlier runs never ended."""
        assert self._driver is not None
        (row,) = await self._driver.fetch(_BEGIN_RUN, job_id)
        cut_short = row["cut_short"]
        assert isinstance(cut_short, int)
        return cut_short

    async def _end_run(self, job_id: int) -> None:
        assert self._driver is not None
        try:
            await self._driver.execute(_END_RUN, job_id)
        except Exception:  # the run did end; a missing end only makes the next one wary
            log.exception("job.end_not_recorded", job_id=job_id)

    async def _start_in_background(self) -> None:
        """`on_start` beside the first jobs rather than before them (it may take seconds)."""
        assert self._on_start is not None
        try:
            await self._on_start()
        except Exception:  # a failed warm-up only means the first job does that work itself
            log.exception("worker.on_start_failed")
        else:
            log.info("worker.warmed_up")

    async def _every(
        self, work: Callable[[], Awaitable[int]], interval: timedelta, what: str
    ) -> None:
        """`work` now and every `interval` until the worker stops (the reaper, the indexer, the
        scheduler's tick); a count it returns above zero is logged as `what`."""
        while not self._stopping.is_set():
            try:
                done = await work()
                if done:
                    log.info(what, count=done)
            except Exception:  # periodic work must not stop the worker
                log.exception("worker.periodic_failed", work=what)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), interval.total_seconds())
