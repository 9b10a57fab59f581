from __future__ import annotations

from dataclasses import dataclass

from application.ports.audit_log import AuditLog
from domain.audit import AuditEntry
from domain.cursors import decode_cursor, encode_cursor, invalid_cursor
from domain.errors import Invalid, field_error
from domain.identity import Caller
from domain.members import require_admin

DEFAULT_LIMIT = 50


@dataclass(frozen=True, slots=True, kw_only=True)
class ListAuditLogQuery:
    caller: Caller
    limit: object = None
    cursor: object = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditPage:
    entries: list[AuditEntry]
    next_cursor: str | None


class ListAuditLog:
    """The organization's audit log, newest first, a page at a time. Only admins (403).
    `limit` is 1 to 100 (50 when absent); `cursor` is the opaque `nextCursor` of the previous
    page (400 for anything else); the last page's `nextCursor` is null."""

    def __init__(self, audit: AuditLog) -> None:
        self._audit = audit

    async def execute(self, query: ListAuditLogQuery) -> AuditPage:
        require_admin(query.caller)
        limit = DEFAULT_LIMIT if query.limit is None else query.limit
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
            raise Invalid(
                "limit must be an integer from 1 to 100", [field_error("limit", "1 to 100")]
            )
        before = None if query.cursor is None else _decode(query.cursor)
        entries = await self._audit.page(query.caller.org_id, limit=limit + 1, before_id=before)
        more = len(entries) > limit
        entries = entries[:limit]
        return AuditPage(
            entries=entries, next_cursor=_encode(entries[-1].id) if more and entries else None
        )


def _encode(entry_id: int) -> str:
    return encode_cursor(["a", entry_id])


def _decode(cursor: object) -> int:
    parts = decode_cursor(cursor, longest=40)
    if len(parts) != 2 or parts[0] != "a" or type(parts[1]) is not int:
        raise invalid_cursor()
    if not 0 < parts[1] < 2**63:
        raise invalid_cursor()
    return int(parts[1])
