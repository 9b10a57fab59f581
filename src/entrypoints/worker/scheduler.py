"""The worker's side of scheduled tasks: the scheduler's tick, which claims the due tasks of
every organization, and the `task.run` job, which carries out one run."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import structlog
from dishka import AsyncContainer

from application.ports.background_tasks import BackgroundTasks
from application.ports.clock import Clock
from application.ports.scheduled_tasks import DueTasks
from application.use_cases.claim_scheduled_task import (
    ClaimScheduledTask,
    ClaimScheduledTaskCommand,
)
from application.use_cases.execute_scheduled_run import (
    ExecuteScheduledRunCommand,
    FinishScheduledRun,
    StartScheduledRun,
)

log = structlog.get_logger("agent_platform.scheduler")

InOrganization = Callable[[dict[str, Any]], AbstractAsyncContextManager[AsyncContainer]]
# Due tasks claimed per tick; a longer backlog is taken at the next ticks.
CLAIMS_PER_TICK = 100
WAIT_STEP = 5.0


async def claim_due_tasks(container: AsyncContainer, in_organization: InOrganization) -> int:
    """Claim every due task (each in its organization, each once however many workers tick);
    how many runs were recorded."""
    clock = await container.get(Clock)
    due = await (await container.get(DueTasks)).due(clock.now(), CLAIMS_PER_TICK)
    recorded = 0
    for org_id, task_id in due:
        try:
            async with in_organization({"orgId": org_id}) as scope:
                claim = await scope.get(ClaimScheduledTask)
                run = await claim.execute(ClaimScheduledTaskCommand(org_id=org_id, task_id=task_id))
        except Exception:  # one task's failure must not hold back the others
            log.exception("scheduler.claim_failed", org_id=org_id, task_id=task_id)
            continue
        if run is not None:
            recorded += 1
            log.info(
                "scheduler.run_recorded",
                org_id=org_id,
                task_id=task_id,
                run_id=run.id,
                status=run.status.value,
            )
    return recorded


async def run_scheduled_task(
    container: AsyncContainer, in_organization: InOrganization, payload: dict[str, Any]
) -> None:
    """The `task.run` job: start the run, wait for its answer without holding a database
    connection, then record how it ended."""
    command = ExecuteScheduledRunCommand(org_id=str(payload["orgId"]), run_id=str(payload["runId"]))
    async with in_organization(payload) as scope:
        under_way = await (await scope.get(StartScheduledRun)).execute(command)
    if under_way is None:
        return
    if under_way.chat_run_id is not None:
        background = await container.get(BackgroundTasks)
        while not await background.wait(under_way.chat_run_id, WAIT_STEP):
            pass
    while True:
        async with in_organization(payload) as scope:
            status = await (await scope.get(FinishScheduledRun)).execute(command)
        if status is not None:
            log.info("scheduler.run_ended", run_id=command.run_id, status=status.value)
            return
        await asyncio.sleep(WAIT_STEP)
