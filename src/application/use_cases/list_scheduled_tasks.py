from __future__ import annotations

from dataclasses import dataclass

from application.ports.scheduled_tasks import ScheduledTaskRepository
from domain.errors import NotFound
from domain.identity import Caller
from domain.ids import parse_positive_id
from domain.schedules import TASK_ID_REQUIRED, TASK_NOT_FOUND, ScheduledTask


@dataclass(frozen=True, slots=True, kw_only=True)
class ListScheduledTasksQuery:
    caller: Caller
    task_id: object = None


class ListScheduledTasks:
    """The organization's scheduled tasks (any member may read them), or one by `taskId`
    (404 "Scheduled task not found" for a missing or foreign one)."""

    def __init__(self, tasks: ScheduledTaskRepository) -> None:
        self._tasks = tasks

    async def execute(self, query: ListScheduledTasksQuery) -> list[ScheduledTask]:
        org_id = query.caller.org_id
        if query.task_id is None:
            return await self._tasks.list_all(org_id)
        task = await self._tasks.get(org_id, parse_positive_id(query.task_id, TASK_ID_REQUIRED))
        if task is None:
            raise NotFound(TASK_NOT_FOUND)
        return [task]
