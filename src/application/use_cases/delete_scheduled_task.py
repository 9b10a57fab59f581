from __future__ import annotations

from dataclasses import dataclass

from application.ports.scheduled_tasks import ScheduledTaskRepository
from application.ports.unit_of_work import UnitOfWork
from domain.agents import require_agent_manager
from domain.errors import Invalid, NotFound, field_error
from domain.identity import Caller
from domain.ids import parse_positive_id
from domain.schedules import TASK_ID_REQUIRED, TASK_NOT_FOUND


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteScheduledTaskCommand:
    caller: Caller
    task_id: object


class DeleteScheduledTask:
    """Delete a scheduled task.

    Rules: agent managers only (403); 404 "Scheduled task not found" for a missing or foreign
    task. Its runs and their conversations are kept; a run still queued fails when its turn
    comes, saying the task is gone.
    """

    def __init__(self, tasks: ScheduledTaskRepository, uow: UnitOfWork) -> None:
        self._tasks = tasks
        self._uow = uow

    async def execute(self, command: DeleteScheduledTaskCommand) -> None:
        require_agent_manager(command.caller)
        if command.task_id is None:
            raise Invalid(TASK_ID_REQUIRED, [field_error("taskId", "required")])
        task_id = parse_positive_id(command.task_id, TASK_ID_REQUIRED)
        if not await self._tasks.delete(command.caller.org_id, task_id):
            raise NotFound(TASK_NOT_FOUND)
        await self._uow.commit()
