from __future__ import annotations

from typing import Protocol

from domain.audit import AuditEntry, NewAuditEntry


class AuditLog(Protocol):
    """The organization's audit log. An entry is written in the unit of work of the change it
    records, so that neither is kept without the other."""

    async def record(self, entry: NewAuditEntry) -> None:
        """Add `entry` (its time is the transaction's)."""
        ...

    async def page(self, org_id: str, *, limit: int, before_id: int | None) -> list[AuditEntry]:
        """At most `limit` entries of the organization, newest first, older than `before_id`
        when given."""
        ...
