from __future__ import annotations

from dataclasses import dataclass

from application.ports.scheduled_tasks import ScheduledTaskRepository
from domain.errors import NotFound
from domain.identity import Caller
from domain.schedules import TASK_NOT_FOUND, ScheduledTask, parse_task_id


@dataclass(frozen=True, slots=True, kw_only=True)
class ListScheduledTasksQuery:
    caller: Caller
    task_id: int | None = None

    @classmethod
    def parse(cls, *, caller: Caller, task_id: object = None) -> ListScheduledTasksQuery:
        """Every task, or the one of a well-formed id (400 otherwise)."""
        return cls(caller=caller, task_id=None if task_id is None else parse_task_id(task_id))


class ListScheduledTasks:
    """The organization's scheduled tasks (any member may read them), or one by `taskId`
    (404 "Scheduled task not found" for a missing or foreign one)."""

    def __init__(self, tasks: ScheduledTaskRepository) -> None:
        self._tasks = tasks

    async def execute(self, query: ListScheduledTasksQuery) -> list[ScheduledTask]:
        org_id = query.caller.org_id
        if query.task_id is None:
            return await self._tasks.list_all(org_id)
        task = await self._tasks.get(org_id, query.task_id)
        if task is None:
            raise NotFound(TASK_NOT_FOUND)
        return [task]
