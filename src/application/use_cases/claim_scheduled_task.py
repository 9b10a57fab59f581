from __future__ import annotations

from dataclasses import dataclass

from application.ports.clock import Clock
from application.ports.cron_schedule import CronSchedule
from application.ports.job_queue import JobQueue
from application.ports.scheduled_tasks import ScheduledTaskRepository
from application.ports.unit_of_work import UnitOfWork
from application.scheduling import record_run
from domain.schedules import ScheduledRun


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimScheduledTaskCommand:
    org_id: str
    task_id: int


class ClaimScheduledTask:
    """Claim a task's due occurrence for the scheduler (once per occurrence, whatever the
    number of schedulers).

    Rules: the task is locked only if it is enabled, due now and held by no one else (`FOR
    UPDATE SKIP LOCKED`); another scheduler skips it, and finds it no longer due once this
    claim commits. The claim records the run for the occurrence (`scheduledFor` its time):
    `queued` with its job, or `skipped` while the task's previous run is queued or running;
    and moves `nextRunAt` to the first occurrence after now, in the same transaction, so
    occurrences missed while nothing ran are caught up by this one run. The task shows the run
    as its last (`lastRunAt` the occurrence's time).
    """

    def __init__(
        self,
        tasks: ScheduledTaskRepository,
        jobs: JobQueue,
        uow: UnitOfWork,
        clock: Clock,
        cron: CronSchedule,
    ) -> None:
        self._tasks = tasks
        self._jobs = jobs
        self._uow = uow
        self._clock = clock
        self._cron = cron

    async def execute(self, command: ClaimScheduledTaskCommand) -> ScheduledRun | None:
        """The run recorded, or None when the task was not (or no longer) due or was held."""
        now = self._clock.now()
        task = await self._tasks.claim_due(command.org_id, command.task_id, now)
        if task is None or task.next_run_at is None:
            await self._uow.rollback()
            return None
        run = await record_run(
            self._tasks, self._jobs, task, scheduled_for=task.next_run_at, now=now
        )
        next_run_at = self._cron.next_occurrence(task.cron, task.timezone, now)
        await self._tasks.update(task.org_id, task.id, {"next_run_at": next_run_at})
        await self._uow.commit()
        return run
