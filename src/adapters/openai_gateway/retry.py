"""When a call to an OpenAI-compatible API is worth another attempt, and how long to wait.

Timeouts, failed connections and 408, 409, 429 and 5xx answers are worth it; every other
answer is final. The wait doubles from `backoff_base` up to `backoff_max`, with jitter, unless
the provider named one (`retry-after-ms`, or `Retry-After` in seconds or as an HTTP date),
which is honoured up to `max_retry_after`. Attempts are bounded, and so is the whole by a
deadline when the caller has one.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

import httpx

RETRYABLE_STATUSES = frozenset({408, 409, 429})
_jitter = random.SystemRandom()
T = TypeVar("T")


class Retryable(Exception):
    """A failure worth another attempt: `message` says what failed, `delay` is the wait the
    provider asked for (seconds), if it asked."""

    def __init__(self, message: str, delay: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.delay = delay


class GaveUp(Exception):
    """Every attempt failed, or the next would end past the deadline; `last` is the final
    failure, `attempts` how many were made."""

    def __init__(self, last: Retryable, attempts: int) -> None:
        super().__init__(last.message)
        self.last = last
        self.message = last.message
        self.attempts = attempts


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUSES or status >= 500


def is_retryable_transport(error: httpx.TransportError, *, timeouts: bool = True) -> bool:
    """Whether a request that failed in transport may be sent again.

    A connection that could not be made or broke is always worth another try. With
    `timeouts=False` (a caller whose read timeout already means "the provider fell silent"
    and whose deadline bounds the whole call, as a streamed chat answer's do) a read or write
    timeout and a full connection pool are final instead: another attempt would only wait as
    long again.
    """
    if isinstance(error, httpx.ConnectTimeout):
        return True
    if isinstance(error, httpx.TimeoutException):
        return timeouts
    return True


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or an HTTP date)."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(float(milliseconds) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many attempts a call gets and how long to wait between them (seconds)."""

    max_attempts: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    max_retry_after: float = 30.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    def delay(self, attempt: int, requested: float | None = None) -> float:
        """The wait after failed attempt number `attempt` (from 1); `requested` is the
        provider's own `Retry-After`, if any."""
        if requested is not None:
            return min(max(requested, 0.0), self.max_retry_after)
        ceiling = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
        # Jitter spreads the retries of many callers hit by the same outage.
        return _jitter.uniform(ceiling / 2, ceiling)

    async def run(self, attempt: Callable[[], Awaitable[T]], *, deadline: float | None = None) -> T:
        """`attempt()`'s result, calling it again after each `Retryable` it raises; any other
        exception ends the call at once. Raises `GaveUp` after `max_attempts` failures, or
        sooner when waiting would reach `deadline` (the event loop's clock)."""
        attempts = 1
        while True:
            try:
                return await attempt()
            except Retryable as failure:
                if attempts >= self.max_attempts:
                    raise GaveUp(failure, attempts) from None
                wait = self.delay(attempts, failure.delay)
                if deadline is not None and asyncio.get_running_loop().time() + wait >= deadline:
                    raise GaveUp(failure, attempts) from None
            await asyncio.sleep(wait)
            attempts += 1


CHAT_RETRY = RetryPolicy(max_attempts=3, backoff_base=0.5, backoff_max=8.0, max_retry_after=30.0)
EMBEDDING_RETRY = RetryPolicy(
    max_attempts=5, backoff_base=0.5, backoff_max=20.0, max_retry_after=60.0
)
