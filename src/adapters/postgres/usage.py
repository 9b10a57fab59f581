"""`UsageLedger` in Postgres: one row per model call in `usage_events`, the daily roll-up a
trigger keeps in `usage_daily`, and `spend_reservations` (migration 0009).

Each call is its own short checkout, independent of whatever transaction the caller is in, so a
response that fails (and rolls back) is still charged for its tokens.

A charge (`record`) waits for its commit to reach the disk; a reservation, a resize and a release
do not (`synchronous_commit` off): they are on the path to a chat's first byte, where a flush
costs about as much as the rest of the check, and a commit is visible to the other sessions'
checks at once either way. Only a crash of PostgreSQL itself could lose the reservations of
its last fraction of a second, letting the calls they stood for overshoot a cap once.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal

import asyncpg

from adapters.postgres.database import FairGate, org_connection
from domain.spend import CapPeriod, CapStatus, Period
from domain.usage import UsageEntry

INSERT_USAGE = """
    INSERT INTO usage_events (org_id, user_id, thread_id, purpose, model, input_tokens,
        output_tokens, cost_usd, estimated)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"""
SETTLE = """
    WITH settled AS (DELETE FROM spend_reservations WHERE id = $10)
    INSERT INTO usage_events (org_id, user_id, thread_id, purpose, model, input_tokens,
        output_tokens, cost_usd, estimated)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"""
RESERVE = "SELECT period, cap, spent FROM ap_reserve_spend($1, $2, $3, $4, $5, $6, $7)"
RESIZE = "UPDATE spend_reservations SET amount_usd = $2 WHERE id = $1"
RELEASE = "DELETE FROM spend_reservations WHERE id = $1"
# At most 31 rows of the roll-up, whatever the number of calls.
SPENT = """
    SELECT coalesce(sum(cost_usd) FILTER (WHERE day >= $2), 0),
           coalesce(sum(cost_usd) FILTER (WHERE day >= $3), 0),
           coalesce(sum(cost_usd) FILTER (WHERE day >= $4), 0)
    FROM usage_daily WHERE org_id = $1 AND day >= least($3, $4)"""


class PgUsageLedger:
    """`UsageLedger` in Postgres."""

    def __init__(self, pool: asyncpg.Pool, gate: FairGate | None = None) -> None:
        self._pool = pool
        self._gate = gate

    async def record(self, entry: UsageEntry, *, settles: str | None = None) -> None:
        args = (
            entry.org_id, entry.user_id,
            uuid.UUID(entry.thread_id) if entry.thread_id else None, entry.purpose.value,
            entry.model, entry.input_tokens, entry.output_tokens, entry.cost_usd,
            entry.estimated,
        )  # fmt: skip
        async with org_connection(self._pool, entry.org_id, self._gate) as db:
            if settles is None:
                await db.raw.execute(INSERT_USAGE, *args)
            else:
                await db.raw.execute(SETTLE, *args, uuid.UUID(settles))

    async def reserve(
        self,
        org_id: str,
        reservation_id: str,
        amount: Decimal,
        *,
        ttl: timedelta,
        periods: Mapping[CapPeriod, Period],
    ) -> list[CapStatus]:
        async with org_connection(self._pool, org_id, self._gate, synchronous_commit=False) as db:
            rows = await db.fetch(
                RESERVE, org_id, uuid.UUID(reservation_id), amount, ttl,
                *(periods[period].start for period in CapPeriod),
            )  # fmt: skip
        return [
            CapStatus(
                period=CapPeriod(row["period"]),
                cap=row["cap"],
                spent=row["spent"],
                resets_at=periods[CapPeriod(row["period"])].resets_at,
            )
            for row in rows
        ]

    async def resize(self, org_id: str, reservation_id: str, amount: Decimal) -> None:
        async with org_connection(self._pool, org_id, self._gate, synchronous_commit=False) as db:
            await db.raw.execute(RESIZE, uuid.UUID(reservation_id), amount)

    async def release(self, org_id: str, reservation_id: str) -> None:
        async with org_connection(self._pool, org_id, self._gate, synchronous_commit=False) as db:
            await db.raw.execute(RELEASE, uuid.UUID(reservation_id))

    async def spent(
        self, org_id: str, periods: Mapping[CapPeriod, Period]
    ) -> dict[CapPeriod, Decimal]:
        async with org_connection(self._pool, org_id, self._gate) as db:
            (row,) = await db.fetch(SPENT, org_id, *(periods[period].start for period in CapPeriod))
        return {period: row[index] for index, period in enumerate(CapPeriod)}
