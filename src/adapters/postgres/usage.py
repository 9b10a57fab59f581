"""`UsageLedger` in Postgres: one row per model call in `usage_events`.

Each record is its own short checkout and statement, independent of whatever transaction the
caller is in, so a response that fails (and rolls back) is still charged for its tokens.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal

import asyncpg

from adapters.postgres.database import FairGate, org_connection
from domain.usage import UsageEntry

INSERT_USAGE = """
    INSERT INTO usage_events (org_id, user_id, thread_id, purpose, model, input_tokens,
        output_tokens, cost_usd, estimated)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"""
# Served by `ix_usage_events_org_time`.
SPENT_SINCE = """
    SELECT coalesce(sum(cost_usd), 0) FROM usage_events WHERE org_id = $1 AND created_at >= $2"""


class PgUsageLedger:
    """`UsageLedger` in Postgres, plus the sum the spend caps compare with their limits."""

    def __init__(self, pool: asyncpg.Pool, gate: FairGate | None = None) -> None:
        self._pool = pool
        self._gate = gate

    async def record(self, entry: UsageEntry) -> None:
        async with org_connection(self._pool, entry.org_id, self._gate) as db:
            await db.raw.execute(
                INSERT_USAGE, entry.org_id, entry.user_id,
                uuid.UUID(entry.thread_id) if entry.thread_id else None, entry.purpose.value,
                entry.model, entry.input_tokens, entry.output_tokens, entry.cost_usd,
                entry.estimated,
            )  # fmt: skip

    async def spent_since(self, org_id: str, since: datetime) -> Decimal:
        """What the organization's model calls recorded since `since` cost, in US dollars."""
        async with org_connection(self._pool, org_id, self._gate) as db:
            (row,) = await db.fetch(SPENT_SINCE, org_id, since)
        total: Decimal = row[0]
        return total
