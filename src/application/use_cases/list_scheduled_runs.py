from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from application.ports.scheduled_tasks import ScheduledTaskRepository
from domain.cursors import decode_cursor, encode_cursor, invalid_cursor
from domain.errors import Invalid, NotFound, field_error
from domain.identity import Caller
from domain.schedules import (
    DEFAULT_RUN_PAGE,
    MAX_RUN_PAGE,
    TASK_NOT_FOUND,
    ScheduledRun,
    parse_task_id,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ListScheduledRunsQuery:
    caller: Caller
    task_id: int
    limit: int = DEFAULT_RUN_PAGE
    before: tuple[datetime, str] | None = None

    @classmethod
    def parse(
        cls, *, caller: Caller, task_id: object, limit: object = None, cursor: object = None
    ) -> ListScheduledRunsQuery:
        """The task's id (400 "taskId is required"); `limit` 1 to 100 (20); `cursor` only as a
        previous page's `nextCursor` gave it (400 "cursor is not valid")."""
        task = parse_task_id(task_id)
        if limit is None:
            limit = DEFAULT_RUN_PAGE
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RUN_PAGE:
            raise Invalid(
                f"limit must be an integer from 1 to {MAX_RUN_PAGE}",
                [field_error("limit", "out of range")],
            )
        before = None if cursor is None else _position(cursor)
        return cls(caller=caller, task_id=task, limit=limit, before=before)


@dataclass(frozen=True, slots=True)
class RunPage:
    runs: list[ScheduledRun]
    next_cursor: str | None


class ListScheduledRuns:
    """A task's runs, newest first, a page at a time (any member may read them).

    Rules: `taskId` a task of the caller's organization, even a deleted one's runs are not
    listed (404 "Scheduled task not found").
    """

    def __init__(self, tasks: ScheduledTaskRepository) -> None:
        self._tasks = tasks

    async def execute(self, query: ListScheduledRunsQuery) -> RunPage:
        task_id, limit, before = query.task_id, query.limit, query.before
        org_id = query.caller.org_id
        if await self._tasks.get(org_id, task_id) is None:
            raise NotFound(TASK_NOT_FOUND)
        runs = await self._tasks.list_runs(org_id, task_id, limit=limit + 1, before=before)
        page, more = runs[:limit], len(runs) > limit
        last = page[-1] if page else None
        cursor = encode_cursor([last.created_at.isoformat(), last.id]) if more and last else None
        return RunPage(page, cursor)


def _position(cursor: object) -> tuple[datetime, str]:
    parts = decode_cursor(cursor)
    if len(parts) != 2 or not all(isinstance(p, str) for p in parts):
        raise invalid_cursor()
    try:
        at = datetime.fromisoformat(parts[0])
    except ValueError:
        raise invalid_cursor() from None
    if at.tzinfo is None or len(parts[1]) != 36:
        raise invalid_cursor()
    return at, parts[1]
