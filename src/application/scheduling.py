"""What run-now and the scheduler share: recording a run of a task, queued with its job or
skipped under the skip rule."""

from __future__ import annotations

import uuid
from datetime import datetime

from application.ports.job_queue import JobQueue, scheduled_run_job
from application.ports.scheduled_tasks import ScheduledTaskRepository
from domain.schedules import RunStatus, ScheduledRun, ScheduledTask

SKIPPED_BECAUSE = "The previous run of this task was still queued or running."


async def record_run(
    tasks: ScheduledTaskRepository,
    jobs: JobQueue,
    task: ScheduledTask,
    *,
    scheduled_for: datetime,
    now: datetime,
) -> ScheduledRun:
    """A queued run of `task` with its job, in the caller's unit of work; a `skipped` one (no
    job) while another run of the task is queued or running. The database's one-active-run
    index settles a race with a concurrent run-now. The task shows the run as its last."""
    queued = ScheduledRun(
        id=str(uuid.uuid4()), org_id=task.org_id, task_id=task.id, scheduled_for=scheduled_for,
        status=RunStatus.QUEUED, thread_id=None, error=None, started_at=None, finished_at=None,
        created_at=now,
    )  # fmt: skip
    if await tasks.add_run(queued):
        await jobs.enqueue(scheduled_run_job(task.org_id, queued.id))
        await tasks.show_run(queued, queued.status)
        return queued
    skipped = ScheduledRun(
        id=str(uuid.uuid4()), org_id=task.org_id, task_id=task.id, scheduled_for=scheduled_for,
        status=RunStatus.SKIPPED, thread_id=None, error=SKIPPED_BECAUSE, started_at=None,
        finished_at=now, created_at=now,
    )  # fmt: skip
    await tasks.add_run(skipped)
    await tasks.show_run(skipped, skipped.status)
    return skipped
