from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from application.ports.agent_repository import AgentRepository
from application.ports.clock import Clock
from application.ports.cron_schedule import CronSchedule
from application.ports.scheduled_tasks import ScheduledTaskRepository
from application.ports.unit_of_work import UnitOfWork
from domain.agents import AGENT_ID_REQUIRED, AGENT_NOT_FOUND, require_agent_manager
from domain.errors import Invalid, NotFound, field_error
from domain.identity import Caller
from domain.ids import parse_positive_id
from domain.schedules import (
    TASK_ID_REQUIRED,
    TASK_NOT_FOUND,
    ScheduledTask,
    validate_enabled,
    validate_prompt,
    validate_task_name,
    validate_timezone,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateScheduledTaskCommand:
    caller: Caller
    task_id: object
    fields: dict[str, object] = field(default_factory=dict)
    """The fields the body carried, by their JSON names (`agentId`, `name`, `prompt`, `cron`,
    `timezone`, `enabled`)."""


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
        caller = command.caller
        require_agent_manager(caller)
        if command.task_id is None:
            raise Invalid(TASK_ID_REQUIRED, [field_error("taskId", "required")])
        task_id = parse_positive_id(command.task_id, TASK_ID_REQUIRED)
        changes = await self._changes(caller, command.fields)
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

    async def _changes(self, caller: Caller, fields: dict[str, object]) -> dict[str, Any]:
        changes: dict[str, Any] = {}
        for name in ("agentId", "name", "prompt", "cron", "enabled"):
            if name in fields and fields[name] is None:
                raise Invalid(f"{name} may not be null", [field_error(name, "may not be null")])
        if "agentId" in fields:
            agent_id = parse_positive_id(fields["agentId"], AGENT_ID_REQUIRED)
            if await self._agents.get(caller.org_id, agent_id) is None:
                raise NotFound(AGENT_NOT_FOUND)
            changes["agent_id"] = agent_id
        if "name" in fields:
            changes["name"] = validate_task_name(fields["name"])
        if "prompt" in fields:
            changes["prompt"] = validate_prompt(fields["prompt"])
        if "cron" in fields:
            changes["cron"] = self._cron.validate(fields["cron"])
        if "timezone" in fields:
            changes["timezone"] = validate_timezone(fields["timezone"])
        if "enabled" in fields:
            changes["enabled"] = validate_enabled(fields["enabled"])
        return changes
