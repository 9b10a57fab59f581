"""`AuditLog` in Postgres: the `audit_log` table, on an organization-scoped connection."""

from __future__ import annotations

from typing import Any

from adapters.postgres.database import OrgConnection
from domain.audit import AuditEntry, NewAuditEntry

INSERT_AUDIT = """
    INSERT INTO audit_log (org_id, actor_user_id, action, target_type, target_id, details)
    VALUES ($1, $2, $3, $4, $5, $6)"""
PAGE_AUDIT = """
    SELECT id, at, actor_user_id, action, target_type, target_id, details FROM audit_log
    WHERE org_id = $1 AND ($3::bigint IS NULL OR id < $3)
    ORDER BY id DESC LIMIT $2"""


def _entry(r: Any) -> AuditEntry:
    return AuditEntry(
        id=r[0], at=r[1], actor_user_id=r[2], action=r[3], target_type=r[4], target_id=r[5],
        details=dict(r[6]),
    )  # fmt: skip


class PgAuditLog:
    """`AuditLog` in Postgres: an entry's time is its transaction's (`now()`), and its id,
    which only grows, orders the log and is the page cursor."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def record(self, entry: NewAuditEntry) -> None:
        await self._db.execute(
            INSERT_AUDIT, entry.org_id, entry.actor_user_id, entry.action, entry.target_type,
            entry.target_id, dict(entry.details),
        )  # fmt: skip

    async def page(self, org_id: str, *, limit: int, before_id: int | None) -> list[AuditEntry]:
        rows = await self._db.fetch(PAGE_AUDIT, org_id, limit, before_id)
        return [_entry(r) for r in rows]
