from __future__ import annotations

from dataclasses import dataclass

from application.ports.agent_repository import AgentRepository
from application.ports.clock import Clock
from application.ports.cron_schedule import CronSchedule
from application.ports.scheduled_tasks import ScheduledTaskRepository
from application.ports.unit_of_work import UnitOfWork
from domain.agents import AGENT_NOT_FOUND, require_agent_manager
from domain.errors import NotFound
from domain.identity import Caller
from domain.schedules import NewScheduledTask, ScheduledTask, TaskFields


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateScheduledTaskCommand:
    caller: Caller
    fields: TaskFields

    @classmethod
    def parse(
        cls, *, caller: Caller, schedule: CronSchedule, **fields: object
    ) -> CreateScheduledTaskCommand:
        """Who, then what: an agent manager's request (403 otherwise), its fields parsed by
        `TaskFields.parse`, the cron expression by `schedule`, the cron engine."""
        require_agent_manager(caller)
        return cls(caller=caller, fields=TaskFields.parse(schedule.validate, **fields))


class CreateScheduledTask:
    """Schedule an agent: a prompt sent on a cron schedule in a time zone.

    Rules: only an agent manager (`org:admin` or `org:agents:manage`) may (403). The fields
    follow `domain.schedules.task_fields`: `cron` is five fields or `@hourly`, `@daily`,
    `@weekly`, `@monthly` (400 "Invalid cron expression"). `agentId` must be an agent of the
    caller's organization (404 "Agent not found"). An enabled task's `nextRunAt` is its first
    occurrence after now; the creator is the member the runs act as.
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

    async def execute(self, command: CreateScheduledTaskCommand) -> ScheduledTask:
        caller = command.caller
        require_agent_manager(caller)
        fields = command.fields
        if await self._agents.get(caller.org_id, fields.agent_id) is None:
            raise NotFound(AGENT_NOT_FOUND)
        now = self._clock.now()
        next_run_at = (
            self._cron.next_occurrence(fields.cron, fields.timezone, now)
            if fields.enabled
            else None
        )
        task = await self._tasks.add(
            NewScheduledTask.of(
                fields, org_id=caller.org_id, user_id=caller.user_id, next_run_at=next_run_at
            )
        )
        await self._uow.commit()
        return task
