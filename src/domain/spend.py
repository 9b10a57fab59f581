"""Spend caps: the periods they cover, what was spent in each, and the worst case a model call
may cost before it runs.

A cap is a limit in US dollars on what the organization's model calls cost in the UTC day, the
ISO week (from Monday 00:00 UTC) or the UTC calendar month. A call is admitted while what the
ledger recorded plus what calls under way reserved is below every cap; so concurrent calls can
end above a cap by at most the last admitted call's worst case, never more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from enum import StrEnum

SPEND_CAP_REACHED = "Spend cap reached"
# Tokens a message's framing adds (role, separators) in the chat formats of the providers.
MESSAGE_OVERHEAD_TOKENS = 8
# A call whose output length is not bounded is assumed to write at most this many tokens.
UNBOUNDED_OUTPUT_TOKENS = 4096


class CapPeriod(StrEnum):
    """The periods a cap may cover, in the order they are reported."""

    DAILY = "daily"
    WEEKLY = "weekly"
    MONTHLY = "monthly"


@dataclass(frozen=True, slots=True)
class Period:
    """One period's first day (UTC) and when the next one starts."""

    start: date
    resets_at: datetime


def current_periods(now: datetime) -> dict[CapPeriod, Period]:
    """The day, ISO week and month that contain `now`, in UTC."""
    today = now.astimezone(UTC).date()
    week = today - timedelta(days=today.weekday())
    month = today.replace(day=1)
    next_month = (month + timedelta(days=32)).replace(day=1)
    return {
        CapPeriod.DAILY: Period(today, _midnight(today + timedelta(days=1))),
        CapPeriod.WEEKLY: Period(week, _midnight(week + timedelta(days=7))),
        CapPeriod.MONTHLY: Period(month, _midnight(next_month)),
    }


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class CapStatus:
    """Where one period stands against its cap."""

    period: CapPeriod
    cap: Decimal
    spent: Decimal
    resets_at: datetime

    @property
    def remaining(self) -> Decimal:
        return max(self.cap - self.spent, Decimal(0))

    @property
    def exceeded(self) -> bool:
        return self.spent >= self.cap


def cap_status(
    caps: Mapping[CapPeriod, Decimal],
    spent: Mapping[CapPeriod, Decimal],
    periods: Mapping[CapPeriod, Period],
) -> list[CapStatus]:
    """The status of every period that has a cap, in `CapPeriod` order."""
    return [
        CapStatus(
            period=period,
            cap=caps[period],
            spent=spent.get(period, Decimal(0)),
            resets_at=periods[period].resets_at,
        )
        for period in CapPeriod
        if period in caps
    ]


class SpendCapReached(Exception):
    """A model call was refused: the periods listed have reached their caps (`spent` counts
    what calls under way reserved too)."""

    def __init__(self, breaches: Sequence[CapStatus]) -> None:
        super().__init__(SPEND_CAP_REACHED)
        self.message = SPEND_CAP_REACHED
        self.breaches = tuple(breaches)

    @property
    def explanation(self) -> str:
        """The refusal in a sentence, for a job or answer that fails because of it."""
        reached = "; ".join(
            f"the {breach.period.value} cap of ${breach.cap:,.2f} "
            f"(resets {breach.resets_at:%Y-%m-%d %H:%M} UTC)"
            for breach in self.breaches
        )
        return f"{SPEND_CAP_REACHED}: {reached}."

    def retry_after(self, now: datetime) -> int:
        """Seconds until the latest reset among the periods reached (at least 1)."""
        latest = max(breach.resets_at for breach in self.breaches)
        return max(1, math.ceil((latest - now).total_seconds()))


def worst_case_input_tokens(texts: Sequence[str]) -> int:
    """An upper bound on the tokens `texts` make as one prompt, for any byte-level tokenizer:
    such a tokenizer never makes more tokens than the text has UTF-8 bytes, so no provider's
    count can exceed this (plus each message's framing)."""
    return sum(len(text.encode("utf-8", "surrogatepass")) for text in texts) + (
        MESSAGE_OVERHEAD_TOKENS * max(len(texts), 1)
    )


def estimated_tokens(text: str) -> int:
    """A typical count, for a call whose provider reported none: four characters a token."""
    return len(text) // 4 + (1 if text else 0)
