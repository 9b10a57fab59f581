from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol

from domain.schedules import NewScheduledTask, RunStatus, ScheduledRun, ScheduledTask


class ScheduledTaskRepository(Protocol):
    """An organization's scheduled tasks and their runs, in the caller's unit of work."""

    async def add(self, new: NewScheduledTask) -> ScheduledTask:
        """Store a new task."""
        ...

    async def get(
        self, org_id: str, task_id: int, *, for_update: bool = False
    ) -> ScheduledTask | None:
        """One task of the organization; with `for_update`, locked until the unit of work
        ends."""
        ...

    async def list_all(self, org_id: str) -> list[ScheduledTask]:
        """The organization's tasks, oldest first."""
        ...

    async def update(
        self, org_id: str, task_id: int, changes: Mapping[str, Any]
    ) -> ScheduledTask | None:
        """Change the named columns (`agent_id`, `name`, `prompt`, `cron`, `timezone`,
        `enabled`, `next_run_at`); the last run's columns follow `show_run`."""
        ...

    async def show_run(self, run: ScheduledRun, status: RunStatus) -> None:
        """Show `run`, now `status`, as its task's last run: `last_run_at` becomes the run's
        `scheduled_for` and `last_run_status` `status`, together, unless the task already shows
        a run scheduled for later (an older run ending after a newer one was recorded)."""
        ...

    async def delete(self, org_id: str, task_id: int) -> bool:
        """Delete the task (its runs stay); False when there was none."""
        ...

    async def claim_due(self, org_id: str, task_id: int, now: datetime) -> ScheduledTask | None:
        """Lock the task when it is enabled and due at `now` and no one else holds it
        (`FOR UPDATE SKIP LOCKED`); None otherwise."""
        ...

    async def add_run(self, run: ScheduledRun) -> bool:
        """Record a run; False (nothing recorded) when it is queued while another run of the
        task is queued or running."""
        ...

    async def active_run(self, org_id: str, task_id: int) -> ScheduledRun | None:
        """The task's run that is queued or running, if any."""
        ...

    async def get_run(
        self, org_id: str, run_id: str, *, for_update: bool = False
    ) -> ScheduledRun | None:
        """One run of the organization."""
        ...

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
        """Move a run on; the fields given as None keep their value."""
        ...

    async def list_runs(
        self, org_id: str, task_id: int, *, limit: int, before: tuple[datetime, str] | None
    ) -> list[ScheduledRun]:
        """The task's runs, newest first, after the (created_at, id) of `before`."""
        ...


class DueTasks(Protocol):
    """The tasks of every organization whose next occurrence has come (the scheduler's only
    read across organizations; it returns ids, and each claim is made in its organization)."""

    async def due(self, now: datetime, limit: int) -> list[tuple[str, int]]:
        """(organization, task id) of up to `limit` enabled tasks due at `now`, oldest first."""
        ...
