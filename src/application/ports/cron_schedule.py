from __future__ import annotations

from datetime import datetime
from typing import Protocol


class CronSchedule(Protocol):
    """Cron expressions: which are valid, and when they next fire in a time zone."""

    def validate(self, value: object) -> str:
        """Five fields (minute hour day-of-month month day-of-week), or `@hourly`, `@daily`,
        `@weekly`, `@monthly`, normalised; `Invalid` "Invalid cron expression" otherwise."""
        ...

    def next_occurrence(self, cron: str, timezone: str, after: datetime) -> datetime:
        """The first occurrence strictly after `after`, in UTC, of a valid expression in the
        IANA zone `timezone`: a local time skipped by a spring-forward change fires at the first
        minute after the gap, one repeated by a fall-back change fires once."""
        ...
