"""`ScheduledTaskRepository` and `DueTasks` in Postgres (migration 0011)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import asyncpg

from adapters.postgres.database import OrgConnection
from domain.schedules import NewScheduledTask, RunStatus, ScheduledRun, ScheduledTask

TASK_COLUMNS = (
    "id, org_id, user_id, agent_id, name, prompt, cron, timezone, enabled, next_run_at, "
    "last_run_at, last_run_status, created_at, updated_at"
)
RUN_COLUMNS = (
    "id, org_id, task_id, scheduled_for, status, thread_id, error, started_at, finished_at, "
    "created_at"
)
UPDATABLE = ("agent_id", "name", "prompt", "cron", "timezone", "enabled", "next_run_at")
SHOW_RUN = """
    UPDATE scheduled_tasks SET last_run_at = $3, last_run_status = $4, updated_at = now()
    WHERE org_id = $1 AND id = $2 AND (last_run_at IS NULL OR last_run_at <= $3)"""
INSERT_TASK = f"""
    INSERT INTO scheduled_tasks (org_id, user_id, agent_id, name, prompt, cron, timezone,
        enabled, next_run_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING {TASK_COLUMNS}"""
GET_TASK = f"SELECT {TASK_COLUMNS} FROM scheduled_tasks WHERE org_id = $1 AND id = $2"
LIST_TASKS = f"SELECT {TASK_COLUMNS} FROM scheduled_tasks WHERE org_id = $1 ORDER BY id"
DELETE_TASK = "DELETE FROM scheduled_tasks WHERE org_id = $1 AND id = $2 RETURNING id"
CLAIM = f"""
    SELECT {TASK_COLUMNS} FROM scheduled_tasks
    WHERE org_id = $1 AND id = $2 AND enabled AND next_run_at <= $3
    FOR UPDATE SKIP LOCKED"""
INSERT_RUN = """
    INSERT INTO scheduled_runs (id, org_id, task_id, scheduled_for, status, thread_id, error,
        started_at, finished_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
    ON CONFLICT (task_id) WHERE status IN ('queued', 'running') DO NOTHING
    RETURNING id"""
ACTIVE_RUN = f"""
    SELECT {RUN_COLUMNS} FROM scheduled_runs
    WHERE org_id = $1 AND task_id = $2 AND status IN ('queued', 'running')"""
GET_RUN = f"SELECT {RUN_COLUMNS} FROM scheduled_runs WHERE org_id = $1 AND id = $2"
UPDATE_RUN = """
    UPDATE scheduled_runs SET status = $3, thread_id = coalesce($4, thread_id),
        error = coalesce($5, error), started_at = coalesce($6, started_at),
        finished_at = coalesce($7, finished_at)
    WHERE org_id = $1 AND id = $2"""
LIST_RUNS = f"""
    SELECT {RUN_COLUMNS} FROM scheduled_runs
    WHERE org_id = $1 AND task_id = $2
        AND ($4::timestamptz IS NULL OR (created_at, id) < ($4, $5))
    ORDER BY created_at DESC, id DESC LIMIT $3"""
DUE = "SELECT org_id, task_id FROM ap_due_scheduled_tasks($1, $2)"


def _task(r: Any) -> ScheduledTask:
    return ScheduledTask(
        id=r[0], org_id=r[1], user_id=r[2], agent_id=r[3], name=r[4], prompt=r[5], cron=r[6],
        timezone=r[7], enabled=r[8], next_run_at=r[9], last_run_at=r[10],
        last_run_status=RunStatus(r[11]) if r[11] else None, created_at=r[12], updated_at=r[13],
    )  # fmt: skip


def _run(r: Any) -> ScheduledRun:
    return ScheduledRun(
        id=str(r[0]), org_id=r[1], task_id=r[2], scheduled_for=r[3], status=RunStatus(r[4]),
        thread_id=str(r[5]) if r[5] else None, error=r[6], started_at=r[7], finished_at=r[8],
        created_at=r[9],
    )  # fmt: skip


class PgScheduledTaskRepository:
    """`ScheduledTaskRepository` in Postgres."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def add(self, new: NewScheduledTask) -> ScheduledTask:
        (row,) = await self._db.fetch_in_transaction(
            INSERT_TASK, new.org_id, new.user_id, new.agent_id, new.name, new.prompt, new.cron,
            new.timezone, new.enabled, new.next_run_at,
        )  # fmt: skip
        return _task(row)

    async def get(
        self, org_id: str, task_id: int, *, for_update: bool = False
    ) -> ScheduledTask | None:
        if for_update:
            rows = await self._db.fetch_in_transaction(GET_TASK + " FOR UPDATE", org_id, task_id)
        else:
            rows = await self._db.fetch(GET_TASK, org_id, task_id)
        return _task(rows[0]) if rows else None

    async def list_all(self, org_id: str) -> list[ScheduledTask]:
        return [_task(r) for r in await self._db.fetch(LIST_TASKS, org_id)]

    async def update(
        self, org_id: str, task_id: int, changes: Mapping[str, Any]
    ) -> ScheduledTask | None:
        unknown = set(changes) - set(UPDATABLE)
        if unknown:
            raise ValueError(f"not updatable: {sorted(unknown)}")
        columns = [name for name in UPDATABLE if name in changes]
        assignments = ", ".join(f"{name} = ${i}" for i, name in enumerate(columns, start=3))
        sql = (
            f"UPDATE scheduled_tasks SET {assignments}, updated_at = now() "
            f"WHERE org_id = $1 AND id = $2 RETURNING {TASK_COLUMNS}"
        )
        rows = await self._db.fetch_in_transaction(
            sql, org_id, task_id, *(changes[name] for name in columns)
        )
        return _task(rows[0]) if rows else None

    async def show_run(self, run: ScheduledRun, status: RunStatus) -> None:
        await self._db.execute(SHOW_RUN, run.org_id, run.task_id, run.scheduled_for, status.value)

    async def delete(self, org_id: str, task_id: int) -> bool:
        return bool(await self._db.fetch_in_transaction(DELETE_TASK, org_id, task_id))

    async def claim_due(self, org_id: str, task_id: int, now: datetime) -> ScheduledTask | None:
        rows = await self._db.fetch_in_transaction(CLAIM, org_id, task_id, now)
        return _task(rows[0]) if rows else None

    async def add_run(self, run: ScheduledRun) -> bool:
        rows = await self._db.fetch_in_transaction(
            INSERT_RUN, uuid.UUID(run.id), run.org_id, run.task_id, run.scheduled_for,
            run.status.value, uuid.UUID(run.thread_id) if run.thread_id else None, run.error,
            run.started_at, run.finished_at,
        )  # fmt: skip
        return bool(rows)

    async def active_run(self, org_id: str, task_id: int) -> ScheduledRun | None:
        rows = await self._db.fetch(ACTIVE_RUN, org_id, task_id)
        return _run(rows[0]) if rows else None

    async def get_run(
        self, org_id: str, run_id: str, *, for_update: bool = False
    ) -> ScheduledRun | None:
        sql = GET_RUN + " FOR UPDATE" if for_update else GET_RUN
        fetch = self._db.fetch_in_transaction if for_update else self._db.fetch
        rows = await fetch(sql, org_id, uuid.UUID(run_id))
        return _run(rows[0]) if rows else None

    async def update_run(
        self,
        org_id: str,
        run_id: str,
        *,
        status: RunStatus,
        thread_id: str | None = None,
        error: str | None = None,
        started_at: datetime | None = None,
        finished_at: datetime | None = None,
    ) -> None:
        await self._db.execute(
            UPDATE_RUN, org_id, uuid.UUID(run_id), status.value,
            uuid.UUID(thread_id) if thread_id else None, error, started_at, finished_at,
        )  # fmt: skip

    async def list_runs(
        self, org_id: str, task_id: int, *, limit: int, before: tuple[datetime, str] | None
    ) -> list[ScheduledRun]:
        at, after_id = before if before is not None else (None, None)
        rows = await self._db.fetch(
            LIST_RUNS, org_id, task_id, limit, at, uuid.UUID(after_id) if after_id else None
        )
        return [_run(r) for r in rows]


class PgDueTasks:
    """`DueTasks` through `ap_due_scheduled_tasks`, on a connection of no organization."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def due(self, now: datetime, limit: int) -> list[tuple[str, int]]:
        async with self._pool.acquire() as connection:
            rows = await connection.fetch(
                "SELECT * FROM ap_due_scheduled_tasks($1, $2)", now, limit
            )
        return [(row[0], row[1]) for row in rows]
