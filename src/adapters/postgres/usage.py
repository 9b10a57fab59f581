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
from domain.usage import AbandonedCall, PendingCall, UsageEntry, UsagePurpose

PURPOSES = {purpose.value for purpose in UsagePurpose}

INSERT_USAGE = """
    INSERT INTO usage_events (org_id, user_id, thread_id, purpose, model, input_tokens,
        output_tokens, cost_usd, estimated)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"""
# Charged only while the reservation is there: a call the reaper settled is not charged again.
SETTLE = """
    WITH settled AS (DELETE FROM spend_reservations WHERE id = $10 RETURNING id)
    INSERT INTO usage_events (org_id, user_id, thread_id, purpose, model, input_tokens,
        output_tokens, cost_usd, estimated)
    SELECT $1::text, $2::text, $3::uuid, $4::text, $5::text, $6::integer, $7::integer,
        $8::numeric, $9::boolean
    FROM settled"""
RESERVE = """
    SELECT period, cap, spent
    FROM ap_reserve_spend($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"""
ABANDONED = "SELECT * FROM ap_abandoned_reservations($1, $2)"
RESIZE = """
    UPDATE spend_reservations SET amount_usd = $2, input_tokens = coalesce($3, input_tokens)
    WHERE id = $1"""
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
        call: PendingCall,
    ) -> list[CapStatus]:
        async with org_connection(self._pool, org_id, self._gate, synchronous_commit=False) as db:
            rows = await db.fetch(
                RESERVE, org_id, uuid.UUID(reservation_id), amount, ttl,
                *(periods[period].start for period in CapPeriod),
                call.user_id, uuid.UUID(call.thread_id) if call.thread_id else None,
                call.purpose.value, call.model, call.input_tokens,
                uuid.UUID(call.run_id) if call.run_id else None, call.text_offset,
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

    async def resize(
        self, org_id: str, reservation_id: str, amount: Decimal, *, prompt_tokens: int | None = None
    ) -> None:
        async with org_connection(self._pool, org_id, self._gate, synchronous_commit=False) as db:
            await db.raw.execute(RESIZE, uuid.UUID(reservation_id), amount, prompt_tokens)

    async def release(self, org_id: str, reservation_id: str) -> None:
        async with org_connection(self._pool, org_id, self._gate, synchronous_commit=False) as db:
            await db.raw.execute(RELEASE, uuid.UUID(reservation_id))

    async def abandoned(self, quiet: timedelta, limit: int) -> list[AbandonedCall]:
        async with self._pool.acquire() as connection:
            rows = await connection.fetch(ABANDONED, quiet, limit)
        return [_abandoned(row) for row in rows]

    async def spent(
        self, org_id: str, periods: Mapping[CapPeriod, Period]
    ) -> dict[CapPeriod, Decimal]:
        async with org_connection(self._pool, org_id, self._gate) as db:
            (row,) = await db.fetch(SPENT, org_id, *(periods[period].start for period in CapPeriod))
        return {period: row[index] for index, period in enumerate(CapPeriod)}


def _abandoned(row: asyncpg.Record) -> AbandonedCall:
    call = None
    if row["model"] is not None and row["purpose"] in PURPOSES:
        call = PendingCall(
            user_id=row["user_id"],
            thread_id=str(row["thread_id"]) if row["thread_id"] else None,
            purpose=UsagePurpose(row["purpose"]),
            model=row["model"],
            input_tokens=row["input_tokens"],
            run_id=str(row["run_id"]) if row["run_id"] else None,
        )
    return AbandonedCall(
        reservation_id=str(row["id"]),
        org_id=row["org_id"],
        call=call,
        output_chars=int(row["output_chars"] or 0),
    )
