from __future__ import annotations

from dataclasses import dataclass

from application.ports.audit_log import AuditLog
from domain.audit import (
    AUDIT_LIMIT_INVALID,
    DEFAULT_AUDIT_PAGE,
    MAX_AUDIT_CURSOR,
    MAX_AUDIT_PAGE,
    AuditEntry,
)
from domain.cursors import decode_cursor, encode_cursor, invalid_cursor
from domain.errors import Invalid, field_error
from domain.identity import Caller
from domain.members import require_admin


@dataclass(frozen=True, slots=True, kw_only=True)
class ListAuditLogQuery:
    caller: Caller
    limit: int
    before_id: int | None

    @classmethod
    def parse(
        cls, *, caller: Caller, limit: object = None, cursor: object = None
    ) -> ListAuditLogQuery:
        """Who, then what: an admin's request (403 otherwise); `limit` 1 to 100 (50 when
        absent); `cursor` the opaque `nextCursor` of the previous page (400 for anything
        else)."""
        require_admin(caller)
        if limit is None:
            limit = DEFAULT_AUDIT_PAGE
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_AUDIT_PAGE
        ):
            raise Invalid(AUDIT_LIMIT_INVALID, [field_error("limit", f"1 to {MAX_AUDIT_PAGE}")])
        return cls(
            caller=caller, limit=limit, before_id=None if cursor is None else _decode(cursor)
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditPage:
    entries: list[AuditEntry]
    next_cursor: str | None


class ListAuditLog:
    """The organization's audit log, newest first, a page at a time. Only admins (403). The
    last page's `nextCursor` is null."""

    def __init__(self, audit: AuditLog) -> None:
        self._audit = audit

    async def execute(self, query: ListAuditLogQuery) -> AuditPage:
        require_admin(query.caller)
        limit = query.limit
        entries = await self._audit.page(
            query.caller.org_id, limit=limit + 1, before_id=query.before_id
        )
        more = len(entries) > limit
        entries = entries[:limit]
        return AuditPage(
            entries=entries, next_cursor=_encode(entries[-1].id) if more and entries else None
        )


def _encode(entry_id: int) -> str:
    return encode_cursor(["a", entry_id])


def _decode(cursor: object) -> int:
    parts = decode_cursor(cursor, longest=MAX_AUDIT_CURSOR)
    if len(parts) != 2 or parts[0] != "a" or type(parts[1]) is not int:
        raise invalid_cursor()
    if not 0 < parts[1] < 2**63:
        raise invalid_cursor()
    return int(parts[1])
