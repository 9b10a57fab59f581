"""The queue's count of runs: a run cut short by a dying worker is told to the next one, past
its kind's cap a job is given up instead of run, a dead worker's jobs are released at once,
and failing jobs are still retried with backoff."""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import asyncpg
from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
from pgqueuer.queries import Queries

from adapters.postgres.database import DEFAULT_APP_ROLE, asyncpg_dsn
from adapters.queue.pgqueuer_worker import (
    JobKind,
    JobRun,
    PgQueuerWorker,
    RetryPolicy,
    release_jobs,
)
from tests.queue_support import running

KIND = "test.job"
# A worker whose handler never returns, killed once the job is in hand.
DOOMED = f"""
import asyncio, sys, uuid
from adapters.queue.pgqueuer_worker import JobKind, PgQueuerWorker

async def hang(payload, run):
    print("running", flush=True)
    await asyncio.Event().wait()

worker = PgQueuerWorker(
    sys.argv[1], {{"{KIND}": JobKind(handler=hang)}}, app_role="{DEFAULT_APP_ROLE}",
    worker_id=uuid.UUID(sys.argv[2]),
)
asyncio.run(worker.run())
"""


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await connection.execute(f'SET ROLE "{DEFAULT_APP_ROLE}"')
        yield connection
    finally:
        await connection.close()


async def enqueue(url: str, *payloads: dict[str, Any]) -> list[int]:
    async with connect(url) as connection:
        queries = Queries(AsyncpgDriver(connection))
        return [
            int(i) for p in payloads for i in await queries.enqueue(KIND, json.dumps(p).encode())
        ]


async def until(condition: Callable[[], Any], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not (await result if inspect.isawaitable(result := condition()) else result):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)


async def scalar(url: str, query: str, *args: object) -> Any:
    async with connect(url) as connection:
        return await connection.fetchval(query, *args)


async def test_a_dead_workers_job_is_released_at_once_and_counted_as_cut_short(database, clean):
    (job_id,) = await enqueue(database.url, {"n": 1})
    dead = uuid.uuid4()
    doomed = await asyncio.create_subprocess_exec(
        sys.executable, "-c", DOOMED, database.url, str(dead),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert doomed.stdout is not None
        # Its log shares the output: the handler's line says the job is in hand.
        while (line := await asyncio.wait_for(doomed.stdout.readline(), 30)) != b"running\n":
            assert line, "the worker exited"
    finally:
        doomed.kill()
        await doomed.wait()
    query = "SELECT queue_manager_id FROM pgqueuer WHERE id = $1"
    assert await scalar(database.url, query, job_id) == dead

    runs: list[JobRun] = []

    async def record(payload: dict[str, Any], run: JobRun) -> None:
        runs.append(run)

    # The default heartbeat timeout (30 s): only the release hands the job over this soon.
    kind = JobKind(handler=record, max_cut_short_runs=2)
    worker = PgQueuerWorker(database.url, {KIND: kind}, app_role=DEFAULT_APP_ROLE)
    async with running(worker):
        async with connect(database.url) as connection:
            assert await release_jobs(connection, dead) == 1
        await until(lambda: bool(runs), within=10)
    assert [(r.job_id, r.cut_short_runs) for r in runs] == [(job_id, 1)]
    assert await scalar(database.url, "SELECT count(*) FROM pgqueuer_job_runs") == 0


async def test_past_its_cap_a_job_is_given_up_and_then_dropped(database, clean):
    given_up, dropped = await enqueue(database.url, {"n": 1}, {"n": 2})
    async with connect(database.url) as connection:
        await connection.execute(
            "INSERT INTO pgqueuer_job_runs (job_id, started) VALUES ($1, 1), ($2, 2)",
            given_up,
            dropped,
        )
    handled: list[int] = []
    gave_up: list[tuple[dict[str, Any], int]] = []

    async def handle(payload: dict[str, Any], run: JobRun) -> None:
        handled.append(run.job_id)

    async def give_up(payload: dict[str, Any], run: JobRun) -> None:
        gave_up.append((payload, run.cut_short_runs))

    kind = JobKind(handler=handle, give_up=give_up, max_cut_short_runs=1)
    worker = PgQueuerWorker(database.url, {KIND: kind}, app_role=DEFAULT_APP_ROLE)

    async def both_ended() -> bool:
        query = "SELECT count(*) FROM pgqueuer_job_runs WHERE ended = 0"
        return await scalar(database.url, query) == 0

    async with running(worker):
        await until(both_ended)
    assert handled == [] and gave_up == [({"n": 1}, 1)]
    assert await scalar(database.url, "SELECT count(*) FROM pgqueuer") == 0


async def test_a_failing_job_is_retried_with_backoff(database, clean):
    (job_id,) = await enqueue(database.url, {"n": 1})
    runs: list[tuple[JobRun, float]] = []

    async def flaky(payload: dict[str, Any], run: JobRun) -> None:
        runs.append((run, time.monotonic()))
        if not run.last_attempt:
            raise RuntimeError("not yet")

    policy = RetryPolicy(max_attempts=3, initial_delay=timedelta(milliseconds=200))
    worker = PgQueuerWorker(
        database.url, {KIND: JobKind(handler=flaky)}, app_role=DEFAULT_APP_ROLE, retry=policy
    )
    async with running(worker):
        await until(lambda: len(runs) == 3)
    seen = [(r.attempt, r.last_attempt, r.cut_short_runs) for r, _ in runs]
    assert seen == [(0, False, 0), (1, False, 0), (2, True, 0)]
    times = [t for _, t in runs]
    assert times[1] - times[0] >= 0.2 and times[2] - times[1] >= 0.4
    assert await scalar(database.url, "SELECT count(*) FROM pgqueuer WHERE id = $1", job_id) == 0
