"""Readiness: whether the database, object storage and job queue answer, each within a short
bound, checked concurrently. A failure's detail goes to the log; the answer names the part."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

import structlog

log = structlog.get_logger("agent_platform.http.readiness")

CHECK_TIMEOUT = 2.0
OK = "ok"
FAILED = "failed"
TIMED_OUT = "timeout"
MESSAGES = {FAILED: "did not answer", TIMED_OUT: f"did not answer within {CHECK_TIMEOUT:g} s"}

Check = Callable[[], Awaitable[None]]


async def _outcome(name: str, check: Check, seconds: float) -> str:
    try:
        async with asyncio.timeout(seconds):
            await check()
    except TimeoutError:
        log.warning("readiness check timed out", part=name, seconds=seconds)
        return TIMED_OUT
    except Exception as error:
        # One line, not a traceback: probes repeat every few seconds while a part is down.
        log.warning("readiness check failed", part=name, error=f"{type(error).__name__}: {error}")
        return FAILED
    return OK


async def run_checks(checks: Mapping[str, Check], seconds: float = CHECK_TIMEOUT) -> dict[str, str]:
    """Each part's outcome (`ok`, `failed` or `timeout`), the checks run side by side, each
    bounded by `seconds`."""
    names = list(checks)
    outcomes = await asyncio.gather(*(_outcome(n, checks[n], seconds) for n in names))
    return dict(zip(names, outcomes, strict=True))
