"""The system clock."""

from __future__ import annotations

from datetime import UTC, datetime


class SystemClock:
    """`Clock` reading the machine's time in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)
