"""What operators read from Postgres: readiness probes of the database and the job queue, and
the aggregate counts `GET /metrics` exposes.

Everything here spans organizations and returns counts only. The job queue has no row-level
security (its tables serve every organization); files and the usage ledger are read through the
security-definer functions of migration 0012, which return per-state and per-provider totals and
nothing that names an organization, a user or a message.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal

import asyncpg

# Provider names come from `provider:model` strings the service validated; anything else is
# folded into one label value rather than exposed.
_PROVIDER = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
JOBS = "SELECT entrypoint, status::text AS state, count(*) AS n FROM pgqueuer GROUP BY 1, 2"
# Jobs that ended (`pgqueuer_log` keeps every one) in the last hour: the log only grows, and its
# `created` index keeps the window cheap.
FINISHED_JOBS = (
    "SELECT entrypoint, status::text AS state, count(*) AS n FROM pgqueuer_log "
    "WHERE created > now() - interval '1 hour' AND status NOT IN ('queued', 'picked') "
    "GROUP BY 1, 2"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobCount:
    """Jobs of one kind (the queue's entrypoint) in one state."""

    kind: str
    state: str
    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelUsage:
    """Everything the usage ledger recorded for one model provider."""

    provider: str
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal


@dataclass(frozen=True, slots=True, kw_only=True)
class OperationsSnapshot:
    """The aggregate counts of one scrape."""

    jobs: list[JobCount]
    finished_jobs: list[JobCount]
    files: dict[str, int]
    usage: list[ModelUsage]


PoolFactory = Callable[[], Awaitable[asyncpg.Pool]]
OPERATIONS_POOL_SIZE = 2


class PgOperations:
    """Readiness probes and cross-organization aggregates, acting as the app role with no
    organization set, on a small pool of their own (made at the first probe, so a database
    that is down at start is reported, not fatal): a probe or a scrape never waits behind
    requests for a connection, and cannot take one from them. A scrape's counts are kept for
    `cache_seconds` and computed by one caller at a time, so scrapes as frequent as anyone
    sends them cost the database one round of queries per period."""

    def __init__(self, connect: PoolFactory, *, cache_seconds: float = 10.0) -> None:
        self._connect = connect
        self._pool: asyncpg.Pool | None = None
        self._opening = asyncio.Lock()
        self._cache_seconds = cache_seconds
        self._refreshing = asyncio.Lock()
        self._cached: tuple[float, OperationsSnapshot] | None = None

    async def _acquire_pool(self) -> asyncpg.Pool:
        async with self._opening:
            if self._pool is None:
                self._pool = await self._connect()
            return self._pool

    async def close(self) -> None:
        """Close the pool, if one was made."""
        if self._pool is not None:
            await self._pool.close()

    async def ping_database(self) -> None:
        """Raise unless the database answers a trivial query."""
        async with (await self._acquire_pool()).acquire() as connection:
            await connection.fetchval("SELECT 1")

    async def ping_queue(self) -> None:
        """Raise unless the job queue's table answers the app role."""
        async with (await self._acquire_pool()).acquire() as connection:
            await connection.fetchval("SELECT count(*) FROM (SELECT 1 FROM pgqueuer LIMIT 1) q")

    async def snapshot(self) -> OperationsSnapshot:
        """Jobs by kind and state (waiting or running now, and finished in the last hour),
        files by processing state and model usage by provider, at most `cache_seconds` old."""
        async with self._refreshing:
            now = time.monotonic()
            if self._cached is not None and now - self._cached[0] < self._cache_seconds:
                return self._cached[1]
            snapshot = await self._read()
            self._cached = (time.monotonic(), snapshot)
            return snapshot

    async def _read(self) -> OperationsSnapshot:
        async with (await self._acquire_pool()).acquire() as connection:
            jobs = await connection.fetch(JOBS)
            finished = await connection.fetch(FINISHED_JOBS)
            files = await connection.fetch("SELECT state, files FROM ap_file_state_counts()")
            usage = await connection.fetch(
                "SELECT provider, input_tokens, output_tokens, cost_usd "
                "FROM ap_model_usage_totals()"
            )
        return OperationsSnapshot(
            jobs=[_job(row) for row in jobs],
            finished_jobs=[_job(row) for row in finished],
            files={str(row["state"]): int(row["files"]) for row in files},
            usage=_usage(usage),
        )


def _job(row: asyncpg.Record) -> JobCount:
    return JobCount(kind=str(row["entrypoint"]), state=str(row["state"]), count=int(row["n"]))


def _usage(rows: list[asyncpg.Record]) -> list[ModelUsage]:
    totals: dict[str, ModelUsage] = {}
    for row in rows:
        name = str(row["provider"] or "")
        provider = name if _PROVIDER.fullmatch(name) else "other"
        seen = totals.get(provider)
        totals[provider] = ModelUsage(
            provider=provider,
            input_tokens=int(row["input_tokens"] or 0) + (seen.input_tokens if seen else 0),
            output_tokens=int(row["output_tokens"] or 0) + (seen.output_tokens if seen else 0),
            cost_usd=Decimal(row["cost_usd"] or 0) + (seen.cost_usd if seen else Decimal(0)),
        )
    return list(totals.values())
