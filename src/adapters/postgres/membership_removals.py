"""`MembershipRemovals` in Postgres: the `membership_removals` table."""

from __future__ import annotations

from datetime import datetime

from adapters.postgres.database import OrgConnection

RECORD_REMOVAL = """
    INSERT INTO membership_removals AS r (org_id, user_id, removed_at) VALUES ($1, $2, $3)
    ON CONFLICT (org_id, user_id) DO UPDATE
    SET removed_at = GREATEST(r.removed_at, excluded.removed_at)"""
REMOVED_AT = "SELECT removed_at FROM membership_removals WHERE org_id = $1 AND user_id = $2"


class PgMembershipRemovals:
    """`MembershipRemovals` in Postgres: a removal only ever moves forward (`GREATEST`), so an
    older one delivered late (a webhook) never re-admits tokens a newer one refused."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def record(self, org_id: str, user_id: str, removed_at: datetime) -> None:
        await self._db.execute(RECORD_REMOVAL, org_id, user_id, removed_at)

    async def removed_at(self, org_id: str, user_id: str) -> datetime | None:
        rows = await self._db.fetch(REMOVED_AT, org_id, user_id)
        return rows[0][0] if rows else None
