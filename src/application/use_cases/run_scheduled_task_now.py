from __future__ import annotations

from dataclasses import dataclass

from application.ports.clock import Clock
from application.ports.job_queue import JobQueue
from application.ports.scheduled_tasks import ScheduledTaskRepository
from application.ports.unit_of_work import UnitOfWork
from application.scheduling import record_run
from domain.agents import require_agent_manager
from domain.errors import NotFound
from domain.identity import Caller
from domain.schedules import TASK_NOT_FOUND, ScheduledRun, parse_task_id


@dataclass(frozen=True, slots=True, kw_only=True)
class RunScheduledTaskNowCommand:
    caller: Caller
    task_id: int

    @classmethod
    def parse(cls, *, caller: Caller, task_id: object) -> RunScheduledTaskNowCommand:
        """An agent manager's request (403 otherwise) for a well-formed task id (400)."""
        require_agent_manager(caller)
        return cls(caller=caller, task_id=parse_task_id(task_id))


class RunScheduledTaskNow:
    """Run a scheduled task now, whether or not it is enabled, without moving its schedule.

    Rules: agent managers only (403); 404 "Scheduled task not found" for a missing or foreign
    task. Under the skip rule: while a run of the task is queued or running, the new run is
    recorded `skipped`; otherwise it is `queued` and a worker carries it out.
    """

    def __init__(
        self, tasks: ScheduledTaskRepository, jobs: JobQueue, uow: UnitOfWork, clock: Clock
    ) -> None:
        self._tasks = tasks
        self._jobs = jobs
        self._uow = uow
        self._clock = clock

    async def execute(self, command: RunScheduledTaskNowCommand) -> ScheduledRun:
        require_agent_manager(command.caller)
        task = await self._tasks.get(command.caller.org_id, command.task_id, for_update=True)
        if task is None:
            raise NotFound(TASK_NOT_FOUND)
        now = self._clock.now()
        run = await record_run(self._tasks, self._jobs, task, scheduled_for=now, now=now)
        await self._uow.commit()
        return run
