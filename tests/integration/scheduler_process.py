"""One scheduler in its own process, for the race test: `python -m
tests.integration.scheduler_process <database url> <now, ISO>`. It connects, prints `ready`,
waits for a line on its standard input (so that both processes claim together), claims every
due task three times over with its clock at `now`, and prints how many runs it recorded.

It claims with the service's own use case, repository and queue on a pool of the app role, but
without the whole container, whose imports take seconds."""

from __future__ import annotations

import asyncio
import sys
from datetime import datetime

from dishka import Provider, Scope, provide

from adapters.postgres.database import create_pool, org_connection
from adapters.postgres.schedules import PgDueTasks, PgScheduledTaskRepository
from adapters.queue.pgqueuer_queue import PgQueuerJobQueue
from adapters.scheduling.cron import CronsimSchedule
from application.ports.clock import Clock
from application.use_cases.claim_scheduled_task import (
    ClaimScheduledTask,
    ClaimScheduledTaskCommand,
)


class FixedClock:
    def __init__(self, now: datetime) -> None:
        self._now = now

    def now(self) -> datetime:
        return self._now


class ClockAt(Provider):
    """The container's clock replaced by `clock` (the in-process tests)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self._clock = clock

    @provide(scope=Scope.APP)
    def clock(self) -> Clock:
        return self._clock


async def main(url: str, now: datetime) -> int:
    pool = await create_pool(url, app_role="agent_platform_app", size=4)
    clock = FixedClock(now)
    cron = CronsimSchedule()
    try:
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        recorded = 0
        for _ in range(3):
            for org_id, task_id in await PgDueTasks(pool).due(now, 100):
                async with org_connection(pool, org_id) as db:
                    claim = ClaimScheduledTask(
                        PgScheduledTaskRepository(db), PgQueuerJobQueue(db), db, clock, cron
                    )
                    command = ClaimScheduledTaskCommand(org_id=org_id, task_id=task_id)
                    if await claim.execute(command) is not None:
                        recorded += 1
        return recorded
    finally:
        await pool.close()


if __name__ == "__main__":
    print(asyncio.run(main(sys.argv[1], datetime.fromisoformat(sys.argv[2]))))
