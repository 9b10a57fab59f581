"""Scheduled agent runs: a task sends a prompt to an agent on a cron schedule in an IANA time
zone; each occurrence becomes a run.

Occurrences are computed in the task's local time by the `CronSchedule` port: a time that a
spring-forward change skips runs at the first minute after the gap, and a time that a fall-back
change repeats runs once. Occurrences missed while nothing ran collapse into one catch-up run:
the next occurrence is always the first one after the moment a run is claimed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from domain.agents import AGENT_ID_REQUIRED, parse_agent_id
from domain.errors import Invalid, field_error
from domain.ids import parse_positive_id
from domain.text import check_storable, parse_line, required, too_long
from domain.values import UNSET, Parser, Unset, field_values, parse_all, parse_sent

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
MAX_TIME_ZONE = 64
DEFAULT_RUN_PAGE = 20
MAX_RUN_PAGE = 100


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

    @classmethod
    def of(
        cls, fields: TaskFields, *, org_id: str, user_id: str, next_run_at: datetime | None
    ) -> NewScheduledTask:
        """The task `fields` describe, created by `user_id`, first due at `next_run_at`."""
        return cls(**field_values(fields), org_id=org_id, user_id=user_id, next_run_at=next_run_at)


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
    if not isinstance(value, str) or not value or len(value) > MAX_TIME_ZONE or "\x00" in value:
        raise Invalid(UNKNOWN_TIME_ZONE, [field_error("timezone", "expected an IANA name")])
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise Invalid(UNKNOWN_TIME_ZONE, [field_error("timezone", "unknown zone")]) from None
    return value


def validate_prompt(value: object) -> str:
    """1 to 20,000 characters of storable text."""
    if not isinstance(value, str) or not value.strip():
        raise Invalid(required("prompt"), [field_error("prompt", "must be a non-empty string")])
    if len(value) > MAX_PROMPT:
        raise Invalid(too_long("prompt", MAX_PROMPT), [field_error("prompt", "too long")])
    check_storable(value, "prompt")
    return value


def validate_task_name(value: object) -> str:
    """1 to 120 characters on one line (the title rule)."""
    return parse_line(value, field="name", limit=MAX_TASK_NAME)


def validate_enabled(value: object) -> bool:
    if value is None:
        return True
    if not isinstance(value, bool):
        raise Invalid("enabled must be a boolean", [field_error("enabled", "expected a boolean")])
    return value


def parse_task_id(value: object) -> int:
    """A scheduled task's id: required, a positive integer (400 "taskId is required")."""
    if value is None:
        raise Invalid(TASK_ID_REQUIRED, [field_error("taskId", "required")])
    return parse_positive_id(value, TASK_ID_REQUIRED)


def _agent_id(value: object) -> int:
    if value is None:
        raise Invalid(AGENT_ID_REQUIRED, [field_error("agentId", "required")])
    return parse_agent_id(value)


def task_fields(cron: Parser) -> Mapping[str, Parser]:
    """A scheduled task's own fields and their rules, in the order a request's fields are
    checked: the agent's id is required; the name is 1 to 120 characters on one line; the
    prompt 1 to 20,000 characters; `cron` the expression, checked and normalized by the cron
    engine (`CronSchedule.validate`, an adapter's); the time zone an IANA name (`UTC` by
    default); `enabled` a boolean (true by default)."""
    return {
        "agent_id": _agent_id,
        "name": validate_task_name,
        "prompt": validate_prompt,
        "cron": cron,
        "timezone": validate_timezone,
        "enabled": validate_enabled,
    }


TASK_NOT_NULL = ("agent_id", "name", "prompt", "cron", "enabled")
"""The fields a change may not set to null (a null `timezone` means `UTC`)."""
_WIRE = {"agent_id": "agentId"}


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskFields:
    """A new scheduled task's own fields, parsed."""

    agent_id: int
    name: str
    prompt: str
    cron: str
    timezone: str = "UTC"
    enabled: bool = True

    @classmethod
    def parse(cls, cron: Parser, /, **raw: object) -> TaskFields:
        """The request's fields, each of `task_fields(cron)` in turn (an absent one as null)."""
        return cls(**parse_all(task_fields(cron), raw))


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskChanges:
    """The fields a change sends, parsed as a new task's; `UNSET` marks one not sent."""

    agent_id: int | Unset = UNSET
    name: str | Unset = UNSET
    prompt: str | Unset = UNSET
    cron: str | Unset = UNSET
    timezone: str | Unset = UNSET
    enabled: bool | Unset = UNSET

    @classmethod
    def parse(cls, cron: Parser, /, **raw: object) -> TaskChanges:
        """The request's fields that were sent: first none of `TASK_NOT_NULL` may be null (400
        "<field> may not be null"), then each by its rule in `task_fields(cron)`."""
        for name in TASK_NOT_NULL:
            if name in raw and raw[name] is None:
                wire = _WIRE.get(name, name)
                raise Invalid(f"{wire} may not be null", [field_error(wire, "may not be null")])
        return cls(**parse_sent(task_fields(cron), raw))
