from __future__ import annotations

from dataclasses import dataclass

from application.ports.scheduled_tasks import ScheduledTaskRepository
from application.ports.unit_of_work import UnitOfWork
from domain.agents import require_agent_manager
from domain.errors import NotFound
from domain.identity import Caller
from domain.schedules import TASK_NOT_FOUND, parse_task_id


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteScheduledTaskCommand:
    caller: Caller
    task_id: int

    @classmethod
    def parse(cls, *, caller: Caller, task_id: object) -> DeleteScheduledTaskCommand:
        """An agent manager's request (403 otherwise) for a well-formed task id (400)."""
        require_agent_manager(caller)
        return cls(caller=caller, task_id=parse_task_id(task_id))


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
        if not await self._tasks.delete(command.caller.org_id, command.task_id):
            raise NotFound(TASK_NOT_FOUND)
        await self._uow.commit()
