"""`agent-platform tasks list` and `tasks run-now TASK_ID`: an organization's scheduled tasks
from the command line, through the same use cases and container as `/scheduled-tasks`.

`run-now` records the run (queued, or skipped under the skip rule) and leaves it to the worker,
as `POST /scheduled-tasks/run` does. Output goes to standard output (with `--json`, the records
`GET /scheduled-tasks` answers, times written as HTTP writes them); errors to standard error with
exit code 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from application.use_cases.list_scheduled_tasks import ListScheduledTasks, ListScheduledTasksQuery
from application.use_cases.run_scheduled_task_now import (
    RunScheduledTaskNow,
    RunScheduledTaskNowCommand,
)
from domain.errors import DomainError
from entrypoints.cli_scope import admin_scope
from entrypoints.config import Settings
from entrypoints.database import Database


def add_task_commands(commands: Any) -> None:
    """The `tasks` command and its subcommands, on the CLI's subparsers."""
    tasks = commands.add_parser("tasks", help="scheduled agent runs").add_subparsers(
        dest="tasks_command", required=True
    )
    listing = tasks.add_parser("list", help="list the organization's scheduled tasks")
    run_now = tasks.add_parser("run-now", help="run a scheduled task now (the worker runs it)")
    run_now.add_argument("task_id", type=int, metavar="TASK_ID")
    for sub in (listing, run_now):
        sub.add_argument("--org", required=True, help="organization id to act in")
        sub.add_argument("--user", default="cli", help="user id to act as (default: cli)")
        sub.add_argument("--json", action="store_true", help="print the records as JSON")


async def run_tasks(settings: Settings, database: Database, args: argparse.Namespace) -> int:
    """Run `tasks list` or `tasks run-now` as `args` say; the process's exit code."""
    try:
        async with admin_scope(settings, database, args) as (scope, caller):
            if args.tasks_command == "list":
                tasks = await (await scope.get(ListScheduledTasks)).execute(
                    ListScheduledTasksQuery.parse(caller=caller)
                )
                import msgspec

                from entrypoints.http.schedule_schemas import TaskOut

                records = msgspec.to_builtins(TaskOut.from_entities(tasks))
                if args.json:
                    print(json.dumps(records, indent=2))
                for record in [] if args.json else records:
                    print(
                        f"{record['id']:>6}  {'on ' if record['enabled'] else 'off'}  "
                        f"{record['cron']:<16} {record['timezone']:<20} "
                        f"next {record['nextRunAt'] or '-':<26} {record['name']}"
                    )
                return 0
            run = await (await scope.get(RunScheduledTaskNow)).execute(
                RunScheduledTaskNowCommand.parse(caller=caller, task_id=args.task_id)
            )
            record = {"id": run.id, "taskId": run.task_id, "status": run.status.value}
            print(json.dumps(record) if args.json else f"run {run.id}: {run.status.value}")
            return 0
    except DomainError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return 1
