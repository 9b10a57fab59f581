"""Scheduled agent runs: a task sends a prompt to an agent on a cron schedule in an IANA time
zone; each occurrence becomes a run.

Occurrences are computed in the task's local time by the `CronSchedule` port: a time that a
spring-forward change skips runs at the first minute after the gap, and a time that a fall-back
change repeats runs once. Occurrences missed while nothing ran collapse into one catch-up run:
the next occurrence is always the first one after the moment a run is claimed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from domain.errors import Invalid, field_error
from domain.text import check_single_line, check_storable

INVALID_CRON = "Invalid cron expression"
UNKNOWN_TIME_ZONE = "Unknown time zone"
TASK_NOT_FOUND = "Scheduled task not found"
TASK_ID_REQUIRED = "taskId is required"
AGENT_GONE = "The task's agent no longer exists."
TASK_GONE = "The task was deleted or disabled before the run started."
RUN_STALLED = "The run stopped before it finished (the worker running it went away)."
MAX_PROMPT = 20_000
MAX_TASK_NAME = 120  # a run's conversation is titled by it (the title rule)
MAX_CRON = 200


class RunStatus(StrEnum):
    """Where a run is: `queued`, `running`, then `succeeded`, `failed`; or `skipped` at once
    (the task's previous run was still queued or running)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"

    @property
    def is_active(self) -> bool:
        return self in (RunStatus.QUEUED, RunStatus.RUNNING)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduledTask:
    """A prompt sent to an agent on a schedule, as the member who created the task."""

    id: int
    org_id: str
    user_id: str
    agent_id: int
    name: str
    prompt: str
    cron: str
    timezone: str
    enabled: bool
    next_run_at: datetime | None
    last_run_at: datetime | None
    last_run_status: RunStatus | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class NewScheduledTask:
    """The validated fields of a task about to be created."""

    org_id: str
    user_id: str
    agent_id: int
    name: str
    prompt: str
    cron: str
    timezone: str
    enabled: bool
    next_run_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduledRun:
    """One occurrence of a task (or a run asked for now), and how it ended."""

    id: str
    org_id: str
    task_id: int
    scheduled_for: datetime
    status: RunStatus
    thread_id: str | None
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None
    created_at: datetime


def validate_timezone(value: object) -> str:
    """An IANA time zone name (`UTC` when absent); 400 "Unknown time zone" otherwise."""
    if value is None:
        return "UTC"
    if not isinstance(value, str) or not value or len(value) > 64 or "\x00" in value:
        raise Invalid(UNKNOWN_TIME_ZONE, [field_error("timezone", "expected an IANA name")])
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise Invalid(UNKNOWN_TIME_ZONE, [field_error("timezone", "unknown zone")]) from None
    return value


def validate_prompt(value: object) -> str:
    """1 to 20,000 characters of storable text."""
    if not isinstance(value, str) or not value.strip():
        raise Invalid("prompt is required", [field_error("prompt", "must be a non-empty string")])
    if len(value) > MAX_PROMPT:
        raise Invalid(
            f"prompt must be at most {MAX_PROMPT} characters",
            [field_error("prompt", "too long")],
        )
    check_storable(value, "prompt")
    return value


def validate_task_name(value: object) -> str:
    """1 to 120 characters on one line (the title rule)."""
    if not isinstance(value, str) or not value.strip():
        raise Invalid("name is required", [field_error("name", "must be a non-empty string")])
    name = value.strip()
    if len(name) > MAX_TASK_NAME:
        raise Invalid(
            f"name must be at most {MAX_TASK_NAME} characters", [field_error("name", "too long")]
        )
    check_single_line(name, "name")
    return name


def validate_enabled(value: object) -> bool:
    if value is None:
        return True
    if not isinstance(value, bool):
        raise Invalid("enabled must be a boolean", [field_error("enabled", "expected a boolean")])
    return value
