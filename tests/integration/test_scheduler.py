"""The scheduler's claims in Postgres with a controllable clock: one catch-up run after downtime,
the skip rule, disabled tasks left alone, and each occurrence claimed once by two scheduler
processes racing on the same due tasks."""

from __future__ import annotations

import asyncio
import sys
from asyncio.subprocess import PIPE
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text

from adapters.postgres.agents import PgAgentRepository
from adapters.postgres.database import org_connection
from adapters.postgres.schedules import PgScheduledTaskRepository
from domain.agents import NewAgent
from domain.identity import ADMIN_ROLE, Identity
from domain.schedules import NewScheduledTask, RunStatus
from entrypoints.config import Settings
from entrypoints.wiring import make_container
from entrypoints.worker.scheduler import claim_due_tasks
from tests.fakes.basics import FakeClock
from tests.integration.scheduler_process import ClockAt

pytestmark = pytest.mark.usefixtures("clean")
T0 = datetime(2026, 11, 23, 7, 0, tzinfo=UTC)


async def add_tasks(
    app_pool, org: str, count: int, *, cron: str = "*/10 * * * *", enabled: bool = True
) -> list[int]:
    async with org_connection(app_pool, org) as db:
        agent = await PgAgentRepository(db).add(
            NewAgent(org_id=org, user_id="user_1", name="Digest", description="", role="",
                     model="openai:scripted")
        )  # fmt: skip
        tasks = PgScheduledTaskRepository(db)
        ids = []
        for number in range(count):
            task = await tasks.add(
                NewScheduledTask(
                    org_id=org, user_id="user_1", agent_id=agent.id, name=f"Task {number}",
                    prompt="Summarise.", cron=cron, timezone="Europe/Berlin", enabled=enabled,
                    next_run_at=T0 if enabled else None,
                )
            )  # fmt: skip
            ids.append(task.id)
        await db.commit()
    return ids


@pytest.fixture
async def scheduler(tmp_root, database) -> Any:
    clock = FakeClock(T0)
    settings = Settings(data_dir=tmp_root / "scheduler")
    container = make_container(settings, database, ClockAt(clock))

    def in_organization(payload: dict[str, Any]) -> Any:
        identity = Identity(user_id="system:worker", org_id=payload["orgId"], role=ADMIN_ROLE)
        return container(context={Identity: identity})

    async def tick() -> int:
        return await claim_due_tasks(container, in_organization)

    tick.clock = clock  # type: ignore[attr-defined]
    yield tick
    await container.close()


async def rows(owner_engine, sql: str) -> list[tuple[Any, ...]]:
    async with owner_engine.connect() as connection:
        return [tuple(r) for r in await connection.execute(text(sql))]


async def test_occurrences_missed_while_nothing_ran_are_caught_up_by_one_run(
    app_pool, owner_engine, scheduler
):
    (task_id,) = await add_tasks(app_pool, "org_a", 1)
    # Three hours of downtime: eighteen occurrences passed, one run makes up for them.
    scheduler.clock.current = T0 + timedelta(hours=3, minutes=5)
    assert await scheduler() == 1
    assert await scheduler() == 0
    (run,) = await rows(owner_engine, "SELECT task_id, scheduled_for, status FROM scheduled_runs")
    assert run == (task_id, T0, "queued")
    (task,) = await rows(
        owner_engine, "SELECT next_run_at, last_run_at, last_run_status FROM scheduled_tasks"
    )
    assert task == (T0 + timedelta(hours=3, minutes=10), T0, "queued")
    jobs = await rows(owner_engine, "SELECT entrypoint FROM pgqueuer")
    assert jobs == [("task.run",)]


async def test_an_occurrence_whose_previous_run_is_still_going_is_recorded_skipped(
    app_pool, owner_engine, scheduler
):
    (task_id,) = await add_tasks(app_pool, "org_a", 1)
    scheduler.clock.current = T0 + timedelta(minutes=1)
    assert await scheduler() == 1
    scheduler.clock.current = T0 + timedelta(minutes=10, seconds=30)
    assert await scheduler() == 1
    runs = await rows(
        owner_engine, "SELECT scheduled_for, status FROM scheduled_runs ORDER BY scheduled_for"
    )
    assert runs == [(T0, "queued"), (T0 + timedelta(minutes=10), "skipped")]
    assert len(await rows(owner_engine, "SELECT 1 FROM pgqueuer")) == 1
    shown = "SELECT last_run_at, last_run_status FROM scheduled_tasks"
    assert await rows(owner_engine, shown) == [(T0 + timedelta(minutes=10), "skipped")]
    # The older run ending later leaves the task showing the newer one.
    async with org_connection(app_pool, "org_a") as db:
        tasks = PgScheduledTaskRepository(db)
        (older,) = [r for r in await tasks.list_runs("org_a", task_id, limit=5, before=None)
                    if r.status is RunStatus.QUEUED]  # fmt: skip
        await tasks.show_run(older, RunStatus.SUCCEEDED)
        await db.commit()
    assert await rows(owner_engine, shown) == [(T0 + timedelta(minutes=10), "skipped")]


async def test_disabled_tasks_and_tasks_not_yet_due_do_not_run(app_pool, owner_engine, scheduler):
    await add_tasks(app_pool, "org_a", 1, enabled=False)
    await add_tasks(app_pool, "org_b", 1)
    scheduler.clock.current = T0 - timedelta(seconds=1)
    assert await scheduler() == 0
    assert await rows(owner_engine, "SELECT 1 FROM scheduled_runs") == []


async def test_two_scheduler_processes_racing_claim_each_occurrence_once(
    app_pool, owner_engine, database
):
    ids = await add_tasks(app_pool, "org_a", 25) + await add_tasks(app_pool, "org_b", 25)
    now = (T0 + timedelta(minutes=3)).isoformat()
    command = [sys.executable, "-m", "tests.integration.scheduler_process", database.url, now]
    pipes = {"stdin": PIPE, "stdout": PIPE, "stderr": PIPE}
    processes = [await asyncio.create_subprocess_exec(*command, **pipes) for _ in range(2)]
    for process in processes:
        assert process.stdout is not None
        ready = await asyncio.wait_for(process.stdout.readline(), 60)
        assert ready == b"ready\n"
    outputs = await asyncio.gather(*(p.communicate(b"go\n") for p in processes))
    assert all(p.returncode == 0 for p in processes), [o[1].decode()[-2000:] for o in outputs]
    counts = [int(out.decode().strip().splitlines()[-1]) for out, _ in outputs]
    assert sum(counts) == len(ids)
    per_task = await rows(
        owner_engine, "SELECT task_id, count(*), min(status) FROM scheduled_runs GROUP BY task_id"
    )
    assert sorted(per_task) == [(task_id, 1, "queued") for task_id in sorted(ids)]
    assert len(await rows(owner_engine, "SELECT 1 FROM pgqueuer")) == len(ids)


async def test_the_reaper_fails_runs_left_running_by_a_worker_that_went_away(
    app_pool, owner_engine
):
    (task_id,) = await add_tasks(app_pool, "org_a", 1)
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO scheduled_runs (id, org_id, task_id, scheduled_for, status, "
                "started_at) VALUES (gen_random_uuid(), 'org_a', :task, now(), 'running', "
                "now() - interval '2 hours'), (gen_random_uuid(), 'org_a', :task, now(), "
                "'succeeded', now() - interval '3 hours')"
            ),
            {"task": task_id},
        )
    async with app_pool.acquire() as connection:
        reaped = await connection.fetch(
            "SELECT * FROM ap_reap_stalled_scheduled_runs($1)", timedelta(minutes=30)
        )
        again = await connection.fetch(
            "SELECT * FROM ap_reap_stalled_scheduled_runs($1)", timedelta(minutes=30)
        )
    assert [r["org_id"] for r in reaped] == ["org_a"] and again == []
    runs = await rows(owner_engine, "SELECT status, error IS NOT NULL FROM scheduled_runs")
    assert sorted(runs) == [("failed", True), ("succeeded", False)]
    (task,) = await rows(
        owner_engine,
        "SELECT t.last_run_status, t.last_run_at = r.scheduled_for FROM scheduled_tasks t "
        "JOIN scheduled_runs r ON r.task_id = t.id AND r.status = 'failed'",
    )
    assert task == ("failed", True)  # the task shows the failed run, at that run's time
