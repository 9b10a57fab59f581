"""`WebhookReceipts` in Postgres: the `webhook_receipts` table, and its pruning."""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg

from adapters.postgres.database import OrgConnection

FIRST_RECEIPT = """
    INSERT INTO webhook_receipts (message_id, received_at) VALUES ($1, $2)
    ON CONFLICT (message_id) DO NOTHING RETURNING message_id"""


class PgWebhookReceipts:
    """`WebhookReceipts` in Postgres: one row per message id, across organizations (the table
    has no row-level security). A concurrent delivery of the same id waits for the first one's
    transaction: it is a redelivery if that one commits, a first time if it rolls back."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def first_time(self, message_id: str, received_at: datetime) -> bool:
        return bool(await self._db.fetch_in_transaction(FIRST_RECEIPT, message_id, received_at))


async def prune_webhook_receipts(connection: asyncpg.Connection, older_than: timedelta) -> int:
    """Drop the receipts of webhook messages received longer than `older_than` ago; how many."""
    status: str = await connection.execute(
        "DELETE FROM webhook_receipts WHERE received_at < now() - $1::interval", older_than
    )
    return int(status.rsplit(" ", 1)[-1])
