"""Inbound e-mail in Postgres: the cross-organization lookup of an address (through the
SECURITY DEFINER function of migration 0010) and the messages each knowledge base received."""

from __future__ import annotations

import uuid

import asyncpg

from adapters.postgres.database import FairGate, OrgConnection, org_connection
from domain.inbound_email import InboundDelivery, InboundRecipient

FIND_RECIPIENT = "SELECT org_id, knowledge_base_id FROM ap_inbound_email_recipient($1::text[])"
CLAIM = """
    INSERT INTO inbound_emails (email_id, org_id, knowledge_base_id, message_id)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT ON CONSTRAINT uq_inbound_emails_message DO NOTHING
    RETURNING email_id"""
EARLIER = """
    SELECT email_id::text, file_ids::text[] FROM inbound_emails
    WHERE org_id = $1 AND knowledge_base_id = $2 AND message_id = $3"""
RECORD_FILES = "UPDATE inbound_emails SET file_ids = $3 WHERE org_id = $1 AND email_id = $2"


class PgInboundRecipients:
    """`InboundRecipients` on a connection of no organization: it sees no row of any table
    itself, and asks `ap_inbound_email_recipient`, which answers only the two ids."""

    def __init__(self, pool: asyncpg.Pool, gate: FairGate) -> None:
        self._pool = pool
        self._gate = gate

    async def find(self, addresses: list[str]) -> InboundRecipient | None:
        async with org_connection(self._pool, None, self._gate) as db:
            rows = await db.fetch(FIND_RECIPIENT, addresses)
        if not rows:
            return None
        return InboundRecipient(org_id=rows[0][0], kb_id=int(rows[0][1]))


class PgInboundDeliveries:
    """`InboundDeliveries` in Postgres: the unique key (organization, knowledge base, message
    key) makes a concurrent second claim wait for the first and then find it."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def claim(
        self, org_id: str, kb_id: int, message_key: str, email_id: str
    ) -> InboundDelivery | None:
        claimed = await self._db.fetch_in_transaction(
            CLAIM, uuid.UUID(email_id), org_id, kb_id, message_key
        )
        if claimed:
            return None
        rows = await self._db.fetch(EARLIER, org_id, kb_id, message_key)
        return InboundDelivery(email_id=rows[0][0], file_ids=list(rows[0][1]))

    async def record_files(self, org_id: str, email_id: str, file_ids: list[str]) -> None:
        await self._db.execute(
            RECORD_FILES, org_id, uuid.UUID(email_id), [uuid.UUID(f) for f in file_ids]
        )
