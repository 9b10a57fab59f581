"""`/scheduled-tasks`: schedule agents, run them now, read their runs."""

from __future__ import annotations

from typing import Annotated

from dishka import FromDishka
from litestar import Controller, delete, get, patch, post
from litestar.params import JSONBody, QueryParameter

from application.ports.cron_schedule import CronSchedule
from application.use_cases.create_scheduled_task import (
    CreateScheduledTask,
    CreateScheduledTaskCommand,
)
from application.use_cases.delete_scheduled_task import (
    DeleteScheduledTask,
    DeleteScheduledTaskCommand,
)
from application.use_cases.list_scheduled_runs import ListScheduledRuns, ListScheduledRunsQuery
from application.use_cases.list_scheduled_tasks import ListScheduledTasks, ListScheduledTasksQuery
from application.use_cases.run_scheduled_task_now import (
    RunScheduledTaskNow,
    RunScheduledTaskNowCommand,
)
from application.use_cases.update_scheduled_task import (
    UpdateScheduledTask,
    UpdateScheduledTaskCommand,
)
from domain.agents import require_agent_manager
from domain.identity import Caller
from domain.schedules import MAX_RUN_PAGE
from entrypoints.http.injection import inject
from entrypoints.http.openapi import body_errors, errors
from entrypoints.http.params import TASK_ID
from entrypoints.http.rules import access
from entrypoints.http.schedule_schemas import (
    CreateTaskBody,
    RunListResponse,
    RunOut,
    RunResponse,
    RunTaskBody,
    TaskListResponse,
    TaskOut,
    TaskResponse,
    UpdateTaskBody,
)
from entrypoints.http.schemas import SuccessMessage, command


class ScheduledTaskController(Controller):
    path = "/scheduled-tasks"
    tags = ["Scheduled tasks"]

    @post(
        status_code=201,
        responses=body_errors(403, 404),
        summary="Schedule an agent",
        opt=access(require_agent_manager),
    )
    @inject
    async def create(
        self,
        data: JSONBody[CreateTaskBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[CreateScheduledTask],
        schedule: FromDishka[CronSchedule],
    ) -> TaskResponse:
        task = await use_case.execute(
            command(CreateScheduledTaskCommand.parse, data, caller=caller, schedule=schedule)
        )
        return TaskResponse(success=True, task=TaskOut.from_entity(task))

    @get(
        responses=errors(400, 403, 404),
        summary="List the organization's scheduled tasks, or get one with taskId",
        description="With `taskId` the body is `{success, task}`; otherwise `{success, tasks}`.",
    )
    @inject
    async def read(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[ListScheduledTasks],
        task_id: Annotated[int | None, TASK_ID] = None,
    ) -> TaskResponse | TaskListResponse:
        tasks = await use_case.execute(
            ListScheduledTasksQuery.parse(caller=caller, task_id=task_id)
        )
        if task_id is not None:
            return TaskResponse(success=True, task=TaskOut.from_entity(tasks[0]))
        return TaskListResponse(success=True, tasks=TaskOut.from_entities(tasks))

    @patch(
        responses=body_errors(403, 404),
        summary="Change a scheduled task",
        opt=access(require_agent_manager),
    )
    @inject
    async def update(
        self,
        data: JSONBody[UpdateTaskBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[UpdateScheduledTask],
        schedule: FromDishka[CronSchedule],
    ) -> TaskResponse:
        task = await use_case.execute(
            command(UpdateScheduledTaskCommand.parse, data, caller=caller, schedule=schedule)
        )
        return TaskResponse(success=True, task=TaskOut.from_entity(task))

    @delete(
        status_code=200,
        responses=errors(400, 403, 404),
        summary="Delete a scheduled task (its runs and their conversations are kept)",
        opt=access(require_agent_manager),
    )
    @inject
    async def remove(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[DeleteScheduledTask],
        task_id: Annotated[int, TASK_ID],
    ) -> SuccessMessage:
        await use_case.execute(DeleteScheduledTaskCommand.parse(caller=caller, task_id=task_id))
        return SuccessMessage(success=True, message="Scheduled task deleted")

    @post(
        "/run",
        status_code=202,
        responses=body_errors(403, 404),
        summary="Run a scheduled task now",
        description="`queued`, or `skipped` while the task's previous run is queued or running.",
        opt=access(require_agent_manager),
    )
    @inject
    async def run_now(
        self,
        data: JSONBody[RunTaskBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[RunScheduledTaskNow],
    ) -> RunResponse:
        run = await use_case.execute(command(RunScheduledTaskNowCommand.parse, data, caller=caller))
        return RunResponse(success=True, run=RunOut.from_entity(run))

    @get("/runs", responses=errors(400, 403, 404), summary="A scheduled task's runs, newest first")
    @inject
    async def runs(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[ListScheduledRuns],
        task_id: Annotated[int, TASK_ID],
        limit: Annotated[
            int | None,
            QueryParameter(name="limit", ge=1, le=MAX_RUN_PAGE, description="Page size"),
        ] = None,
        cursor: Annotated[
            str | None,
            QueryParameter(name="cursor", description="The previous page's `nextCursor`"),
        ] = None,
    ) -> RunListResponse:
        page = await use_case.execute(
            ListScheduledRunsQuery.parse(caller=caller, task_id=task_id, limit=limit, cursor=cursor)
        )
        return RunListResponse(
            success=True,
            runs=RunOut.from_entities(page.runs),
            next_cursor=page.next_cursor,
        )
