"""`CronSchedule` on cronsim, over `zoneinfo` (tzdata where the system has no zone database).

cronsim fires a fixed local time once on a fall-back day (croniter 7.0 fires it twice) and a
time skipped by a spring-forward change at the first minute after the gap.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from domain.errors import Invalid, field_error
from domain.schedules import INVALID_CRON, MAX_CRON

# cronsim reads five fields only: the nicknames the contract allows, as five fields.
NICKNAMES = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
}


class CronsimSchedule:
    """`CronSchedule` with cronsim."""

    def validate(self, value: object) -> str:
        """Five fields (minute hour day-of-month month day-of-week), or `@hourly`, `@daily`,
        `@weekly`, `@monthly`; 400 "Invalid cron expression" otherwise."""
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_CRON:
            raise Invalid(INVALID_CRON, [field_error("cron", "expected a cron expression")])
        expression = " ".join(value.split())
        if expression.startswith("@"):
            if expression.lower() not in NICKNAMES:
                raise Invalid(INVALID_CRON, [field_error("cron", "unknown nickname")])
            return expression.lower()
        if len(expression.split(" ")) != 5:
            raise Invalid(INVALID_CRON, [field_error("cron", "expected five fields")])
        try:
            CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC))
        except (CronSimError, ValueError, IndexError, KeyError):
            raise Invalid(INVALID_CRON, [field_error("cron", "not a valid expression")]) from None
        return expression

    def next_occurrence(self, cron: str, timezone: str, after: datetime) -> datetime:
        """The first occurrence strictly after `after`, in UTC."""
        expression = NICKNAMES.get(cron, cron)
        occurrence: datetime = next(iter(CronSim(expression, after.astimezone(ZoneInfo(timezone)))))
        return occurrence.astimezone(UTC)
