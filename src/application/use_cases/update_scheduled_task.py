from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from application.ports.agent_repository import AgentRepository
from application.ports.clock import Clock
from application.ports.cron_schedule import CronSchedule
from application.ports.scheduled_tasks import ScheduledTaskRepository
from application.ports.unit_of_work import UnitOfWork
from domain.agents import AGENT_NOT_FOUND, require_agent_manager
from domain.errors import NotFound
from domain.identity import Caller
from domain.schedules import TASK_NOT_FOUND, ScheduledTask, TaskChanges, parse_task_id
from domain.values import sent_values


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateScheduledTaskCommand:
    caller: Caller
    task_id: int
    changes: TaskChanges

    @classmethod
    def parse(
        cls, *, caller: Caller, schedule: CronSchedule, task_id: object, **fields: object
    ) -> UpdateScheduledTaskCommand:
        """Who, then what: an agent manager's request (403 otherwise); the task's id (400
        "taskId is required"), then the fields sent (`TaskChanges.parse`, the cron expression
        by `schedule`, the cron engine)."""
        require_agent_manager(caller)
        task = parse_task_id(task_id)
        return cls(
            caller=caller, task_id=task, changes=TaskChanges.parse(schedule.validate, **fields)
        )


class UpdateScheduledTask:
    """Change a scheduled task.

    Rules: as `CreateScheduledTask` for each field given (a field left out keeps its value;
    `null` is refused, except that `timezone: null` means `UTC`); 403 for a non-manager, 404
    "Scheduled task not found" for a task of another organization. Changing the schedule, the
    time zone or `enabled` recomputes `nextRunAt` from now (a disabled task has none).
    """

    def __init__(
        self,
        tasks: ScheduledTaskRepository,
        agents: AgentRepository,
        uow: UnitOfWork,
        clock: Clock,
        cron: CronSchedule,
    ) -> None:
        self._tasks = tasks
        self._agents = agents
        self._uow = uow
        self._clock = clock
        self._cron = cron

    async def execute(self, command: UpdateScheduledTaskCommand) -> ScheduledTask:
        caller, task_id = command.caller, command.task_id
        require_agent_manager(caller)
        changes: dict[str, Any] = sent_values(command.changes)
        if (
            "agent_id" in changes
            and await self._agents.get(caller.org_id, changes["agent_id"]) is None
        ):
            raise NotFound(AGENT_NOT_FOUND)
        task = await self._tasks.get(caller.org_id, task_id, for_update=True)
        if task is None:
            raise NotFound(TASK_NOT_FOUND)
        if {"cron", "timezone", "enabled"} & set(changes):
            enabled = changes.get("enabled", task.enabled)
            cron = changes.get("cron", task.cron)
            timezone = changes.get("timezone", task.timezone)
            changes["next_run_at"] = (
                self._cron.next_occurrence(cron, timezone, self._clock.now()) if enabled else None
            )
        updated = await self._tasks.update(caller.org_id, task_id, changes) if changes else task
        assert updated is not None
        await self._uow.commit()
        return updated
