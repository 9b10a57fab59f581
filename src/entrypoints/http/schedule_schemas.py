"""Request and response bodies of `/scheduled-tasks`: msgspec Structs, camelCase."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from msgspec import UNSET, Meta, UnsetType

from domain.schedules import MAX_CRON, MAX_PROMPT, MAX_TASK_NAME, MAX_TIME_ZONE
from entrypoints.http.schemas import NOT_BLANK, ONE_LINE, Camel, PositiveId, documented

TaskName = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=MAX_TASK_NAME,
        pattern=r"\S",
        extra_json_schema=documented(ONE_LINE),
    ),
]
Prompt = Annotated[
    str, Meta(min_length=1, max_length=MAX_PROMPT, extra_json_schema=documented(NOT_BLANK))
]
Cron = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=MAX_CRON,
        description="Five fields (minute hour day-of-month month day-of-week), or @hourly, "
        "@daily, @weekly, @monthly",
        examples=["0 8 * * 1-5"],
    ),
]
TimeZone = Annotated[
    str,
    Meta(min_length=1, max_length=MAX_TIME_ZONE, description="An IANA time zone", examples=["UTC"]),
]


class CreateTaskBody(Camel):
    agent_id: PositiveId
    name: TaskName
    prompt: Prompt
    cron: Cron
    timezone: TimeZone | None = None
    enabled: bool | None = None


class UpdateTaskBody(Camel):
    task_id: PositiveId
    agent_id: PositiveId | UnsetType = UNSET
    name: TaskName | UnsetType = UNSET
    prompt: Prompt | UnsetType = UNSET
    cron: Cron | UnsetType = UNSET
    timezone: TimeZone | UnsetType | None = UNSET
    enabled: bool | UnsetType = UNSET


class RunTaskBody(Camel):
    task_id: PositiveId


class TaskOut(Camel):
    id: int
    agent_id: int
    name: str
    prompt: str
    cron: str
    timezone: str
    enabled: bool
    next_run_at: datetime | None
    last_run_at: datetime | None
    last_run_status: str | None
    created_at: datetime
    updated_at: datetime
    user_id: str


class RunOut(Camel):
    id: str
    task_id: int
    scheduled_for: datetime
    status: str
    thread_id: str | None
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None


class TaskResponse(Camel):
    success: bool
    task: TaskOut


class TaskListResponse(Camel):
    success: bool
    tasks: list[TaskOut]


class RunResponse(Camel):
    success: bool
    run: RunOut


class RunListResponse(Camel):
    success: bool
    runs: list[RunOut]
    next_cursor: str | None
