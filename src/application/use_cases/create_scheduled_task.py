from __future__ import annotations

from dataclasses import dataclass

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
    NewScheduledTask,
    ScheduledTask,
    validate_enabled,
    validate_prompt,
    validate_task_name,
    validate_timezone,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateScheduledTaskCommand:
    caller: Caller
    agent_id: object
    name: object
    prompt: object
    cron: object
    timezone: object = None
    enabled: object = None


class CreateScheduledTask:
    """Schedule an agent: a prompt sent on a cron schedule in a time zone.

    Rules: only an agent manager (`org:admin` or `org:agents:manage`) may (403). `agentId` must
    be an agent of the caller's organization (404 "Agent not found"); `name` 1 to 120 characters
    on one line; `prompt` 1 to 20,000 characters; `cron` five fields or `@hourly`, `@daily`,
    `@weekly`, `@monthly` (400 "Invalid cron expression"); `timezone` an IANA name, `UTC` by
    default (400 "Unknown time zone"); `enabled` a boolean, true by default. An enabled task's
    `nextRunAt` is its first occurrence after now; the creator is the member the runs act as.
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
        if command.agent_id is None:
            raise Invalid(AGENT_ID_REQUIRED, [field_error("agentId", "required")])
        agent_id = parse_positive_id(command.agent_id, AGENT_ID_REQUIRED)
        name = validate_task_name(command.name)
        prompt = validate_prompt(command.prompt)
        cron = self._cron.validate(command.cron)
        timezone = validate_timezone(command.timezone)
        enabled = validate_enabled(command.enabled)
        if await self._agents.get(caller.org_id, agent_id) is None:
            raise NotFound(AGENT_NOT_FOUND)
        now = self._clock.now()
        next_run_at = self._cron.next_occurrence(cron, timezone, now) if enabled else None
        task = await self._tasks.add(
            NewScheduledTask(
                org_id=caller.org_id,
                user_id=caller.user_id,
                agent_id=agent_id,
                name=name,
                prompt=prompt,
                cron=cron,
                timezone=timezone,
                enabled=enabled,
                next_run_at=next_run_at,
            )
        )
        await self._uow.commit()
        return task
