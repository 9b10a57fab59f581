"""Scheduled tasks: the repository on the request's connection, the cross-organization due
read on the pool, and the use cases (the scheduler's claim and the run job included)."""

from __future__ import annotations

import asyncpg
from dishka import Provider, Scope, provide, provide_all

from adapters.postgres.schedules import PgDueTasks, PgScheduledTaskRepository
from adapters.scheduling.cron import CronsimSchedule
from application.ports.cron_schedule import CronSchedule
from application.ports.scheduled_tasks import DueTasks, ScheduledTaskRepository
from application.use_cases.claim_scheduled_task import ClaimScheduledTask
from application.use_cases.create_scheduled_task import CreateScheduledTask
from application.use_cases.delete_scheduled_task import DeleteScheduledTask
from application.use_cases.execute_scheduled_run import FinishScheduledRun, StartScheduledRun
from application.use_cases.list_scheduled_runs import ListScheduledRuns
from application.use_cases.list_scheduled_tasks import ListScheduledTasks
from application.use_cases.run_scheduled_task_now import RunScheduledTaskNow
from application.use_cases.update_scheduled_task import UpdateScheduledTask


class ScheduleProvider(Provider):
    """Everything behind `/scheduled-tasks`, the scheduler and the `task.run` job."""

    scope = Scope.REQUEST

    tasks = provide(PgScheduledTaskRepository, provides=ScheduledTaskRepository)
    cron = provide(CronsimSchedule, provides=CronSchedule, scope=Scope.APP)
    use_cases = provide_all(
        CreateScheduledTask,
        UpdateScheduledTask,
        DeleteScheduledTask,
        ListScheduledTasks,
        ListScheduledRuns,
        RunScheduledTaskNow,
        ClaimScheduledTask,
        StartScheduledRun,
        FinishScheduledRun,
    )

    @provide(scope=Scope.APP)
    def due_tasks(self, pool: asyncpg.Pool) -> DueTasks:
        return PgDueTasks(pool)
