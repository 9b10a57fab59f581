"""The local identity directory, membership removals, the audit log and webhook receipts, on an
organization-scoped asyncpg connection.

As in `repositories.py`: fixed statements, each filtering by `org_id` (row-level security is
the second wall), rows read by position. The local directory's members are the rows of
`memberships`: removing one deletes the row, and its metadata with it, so that a member added
again (by `PgMemberDirectory.record_seen`) starts with empty metadata.

An invitation's stored status is `pending` until it is accepted or revoked; a pending one past
`expires_at` reads `expired`, and is marked so when its e-mail is invited again (the partial
unique index allows one pending invitation per e-mail, compared case-insensitively).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from adapters.postgres.database import OrgConnection
from domain.audit import AuditEntry, NewAuditEntry
from domain.errors import Conflict
from domain.members import (
    INVITATION_PENDING,
    NOT_A_MEMBER,
    Invitation,
    InvitationStatus,
    Member,
    Outcome,
)

MEMBER_COLUMNS = "user_id, email, first_name, last_name, public_metadata, last_sign_in_at, role"
LIST_MEMBERS = (
    f"SELECT {MEMBER_COLUMNS} FROM memberships WHERE org_id = $1 ORDER BY created_at, user_id"
)
GET_MEMBER = f"SELECT {MEMBER_COLUMNS} FROM memberships WHERE org_id = $1 AND user_id = $2"
REPLACE_METADATA = f"""
    UPDATE memberships SET public_metadata = $3, updated_at = now()
    WHERE org_id = $1 AND user_id = $2
    RETURNING {MEMBER_COLUMNS}"""
REMOVE_MEMBER = "DELETE FROM memberships WHERE org_id = $1 AND user_id = $2 RETURNING user_id"
REMOVE_MEMBERS = """
    DELETE FROM memberships WHERE org_id = $1 AND user_id = ANY($2::text[]) RETURNING user_id"""

# The status as read: a pending invitation past its expiry is expired.
INVITATION_COLUMNS = (
    "id, email, role, CASE WHEN status = 'pending' AND expires_at <= now() THEN 'expired' "
    "ELSE status END, inviter_user_id, created_at, expires_at"
)
EXPIRE_PENDING = """
    UPDATE invitations SET status = 'expired'
    WHERE org_id = $1 AND lower(email) = lower($2) AND status = 'pending' AND expires_at <= now()"""
# clock_timestamp(), not the transaction's time: invitations made in one transaction keep
# their order.
INSERT_INVITATION = f"""
    INSERT INTO invitations (id, org_id, email, role, status, inviter_user_id, created_at,
        expires_at)
    VALUES ($1, $2, $3, $4, 'pending', $5, clock_timestamp(), $6)
    ON CONFLICT (org_id, lower(email)) WHERE status = 'pending' DO NOTHING
    RETURNING {INVITATION_COLUMNS}"""
LIST_INVITATIONS = f"""
    SELECT {INVITATION_COLUMNS} FROM invitations WHERE org_id = $1
    ORDER BY created_at DESC, id DESC"""
REVOKE_INVITATION = """
    UPDATE invitations SET status = 'revoked', revoked_at = now()
    WHERE org_id = $1 AND id = $2 AND status = 'pending' AND expires_at > now()
    RETURNING id"""

INSERT_AUDIT = """
    INSERT INTO audit_log (org_id, actor_user_id, action, target_type, target_id, details)
    VALUES ($1, $2, $3, $4, $5, $6)"""
PAGE_AUDIT = """
    SELECT id, at, actor_user_id, action, target_type, target_id, details FROM audit_log
    WHERE org_id = $1 AND ($3::bigint IS NULL OR id < $3)
    ORDER BY id DESC LIMIT $2"""

RECORD_REMOVAL = """
    INSERT INTO membership_removals AS r (org_id, user_id, removed_at) VALUES ($1, $2, $3)
    ON CONFLICT (org_id, user_id) DO UPDATE
    SET removed_at = GREATEST(r.removed_at, excluded.removed_at)"""
REMOVED_AT = "SELECT removed_at FROM membership_removals WHERE org_id = $1 AND user_id = $2"

FIRST_RECEIPT = """
    INSERT INTO webhook_receipts (message_id, received_at) VALUES ($1, $2)
    ON CONFLICT (message_id) DO NOTHING RETURNING message_id"""


def new_invitation_id() -> str:
    """`inv_` and 24 random hexadecimal digits (96 bits)."""
    return "inv_" + secrets.token_hex(12)


def _member(r: Any) -> Member:
    return Member(
        id=r[0], email=r[1], first_name=r[2], last_name=r[3], public_metadata=dict(r[4]),
        last_sign_in_at=r[5], role=r[6],
    )  # fmt: skip


def invitation(r: Any) -> Invitation:
    """An `Invitation` from a row of `INVITATION_COLUMNS`."""
    return Invitation(
        id=r[0], email=r[1], role=r[2], status=InvitationStatus(r[3]), inviter_user_id=r[4],
        created_at=r[5], expires_at=r[6],
    )  # fmt: skip


def _entry(r: Any) -> AuditEntry:
    return AuditEntry(
        id=r[0], at=r[1], actor_user_id=r[2], action=r[3], target_type=r[4], target_id=r[5],
        details=dict(r[6]),
    )  # fmt: skip


class PgIdentityDirectory:
    """`IdentityDirectory` of the local directory: `memberships` and `invitations`."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def list_members(self, org_id: str) -> list[Member]:
        return [_member(r) for r in await self._db.fetch(LIST_MEMBERS, org_id)]

    async def get_member(self, org_id: str, user_id: str) -> Member | None:
        rows = await self._db.fetch(GET_MEMBER, org_id, user_id)
        return _member(rows[0]) if rows else None

    async def replace_metadata(
        self, org_id: str, user_id: str, metadata: dict[str, Any]
    ) -> Member | None:
        rows = await self._db.fetch_in_transaction(REPLACE_METADATA, org_id, user_id, metadata)
        return _member(rows[0]) if rows else None

    async def remove_member(self, org_id: str, user_id: str) -> bool:
        return bool(await self._db.fetch_in_transaction(REMOVE_MEMBER, org_id, user_id))

    async def remove_members(self, org_id: str, user_ids: Sequence[str]) -> list[Outcome]:
        if not user_ids:
            return []
        rows = await self._db.fetch_in_transaction(REMOVE_MEMBERS, org_id, list(user_ids))
        removed = {r[0] for r in rows}
        return [
            Outcome(id=user_id, error=None if user_id in removed else NOT_A_MEMBER)
            for user_id in user_ids
        ]

    async def create_invitation(
        self,
        org_id: str,
        *,
        email: str,
        role: str,
        inviter_user_id: str,
        expires_at: datetime,
    ) -> Invitation:
        await self._db.execute(EXPIRE_PENDING, org_id, email)
        rows = await self._db.fetch_in_transaction(
            INSERT_INVITATION, new_invitation_id(), org_id, email, role, inviter_user_id,
            expires_at,
        )  # fmt: skip
        if not rows:
            raise Conflict(INVITATION_PENDING)
        return invitation(rows[0])

    async def list_invitations(self, org_id: str) -> list[Invitation]:
        return [invitation(r) for r in await self._db.fetch(LIST_INVITATIONS, org_id)]

    async def revoke_invitation(self, org_id: str, invitation_id: str) -> bool:
        return bool(await self._db.fetch_in_transaction(REVOKE_INVITATION, org_id, invitation_id))


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
