"""`OrgSettingsRepository` and `SpendTotals` on the request's organization-scoped asyncpg
connection: one row per organization in `org_settings` (migration 0009), its `settings` the
contract's JSON object; spend per period from the `usage_daily` roll-up, with the usage
ledger's own statement.

As in `knowledge_bases.py`, each statement filters by `org_id` too; row-level security is the
second wall.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from adapters.postgres.database import OrgConnection
from adapters.postgres.usage import SPENT
from domain.org_settings import OrgSettings, settings_from_document
from domain.spend import CapPeriod, Period

GET_SETTINGS = "SELECT settings FROM org_settings WHERE org_id = $1"
# The row lock makes concurrent saves of one organization queue, each reading what the one
# before it stored.
LOCK_SETTINGS = GET_SETTINGS + " FOR UPDATE"
SAVE_SETTINGS = """
    INSERT INTO org_settings (org_id, settings, updated_by, updated_at)
    VALUES ($1, $2, $3, now())
    ON CONFLICT (org_id) DO UPDATE
    SET settings = excluded.settings, updated_by = excluded.updated_by, updated_at = now()"""


class PgOrgSettingsRepository:
    """`OrgSettingsRepository` in Postgres."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def get(self, org_id: str) -> OrgSettings | None:
        rows = await self._db.fetch(GET_SETTINGS, org_id)
        return settings_from_document(rows[0][0]) if rows else None

    async def replace(
        self, org_id: str, settings: OrgSettings, *, updated_by: str
    ) -> OrgSettings | None:
        rows = await self._db.fetch_in_transaction(LOCK_SETTINGS, org_id)
        await self._db.execute(SAVE_SETTINGS, org_id, settings.document(), updated_by)
        return settings_from_document(rows[0][0]) if rows else None


class PgSpendTotals:
    """`SpendTotals` on the request's connection (`PgUsageLedger.spent` takes a connection of
    its own)."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def spent(
        self, org_id: str, periods: Mapping[CapPeriod, Period]
    ) -> dict[CapPeriod, Decimal]:
        (row,) = await self._db.fetch(SPENT, org_id, *(periods[p].start for p in CapPeriod))
        return {period: row[index] for index, period in enumerate(CapPeriod)}
