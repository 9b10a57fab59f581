"""The organization's members in Postgres, on an organization-scoped asyncpg connection: the
`MemberDirectory` (who has been seen, kept current from their tokens) and the local
`IdentityDirectory` (what an admin reads and changes when no identity provider is configured).

Fixed statements, each filtering by `org_id` (row-level security is the second wall), rows read
by position. The local directory's members are the rows of `memberships`: removing one deletes
the row, and its metadata with it, so that a member added again (by
`PgMemberDirectory.record_seen`) starts with empty metadata.

An invitation's stored status is `pending` until it is accepted or revoked; a pending one past
`expires_at` reads `expired`, and is marked so when its e-mail is invited again (the partial
unique index allows one pending invitation per e-mail, compared case-insensitively).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from adapters.postgres.database import OrgConnection
from domain.errors import Conflict
from domain.identity import MEMBER_ROLE, Identity
from domain.members import (
    INVITATION_PENDING,
    NOT_A_MEMBER,
    Invitation,
    InvitationStatus,
    Member,
    MembershipSet,
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

UPSERT_ORGANIZATION = """
    INSERT INTO organizations (org_id, created_at, updated_at) VALUES ($1, $2, $2)
    ON CONFLICT (org_id) DO NOTHING"""
FORGET_MEMBERSHIP = "DELETE FROM memberships WHERE org_id = $1 AND user_id = $2 RETURNING user_id"
# The token's claim becomes the role only when it differs from the one remembered (NULL, as
# after a membership event, remembers none): see `MemberDirectory.record_seen`.
UPSERT_MEMBERSHIP = """
    INSERT INTO memberships (org_id, user_id, email, first_name, last_name, role, claimed_role,
        last_sign_in_at, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $7, $7)
    ON CONFLICT (org_id, user_id) DO UPDATE SET
        email = coalesce(excluded.email, memberships.email),
        first_name = coalesce(excluded.first_name, memberships.first_name),
        last_name = coalesce(excluded.last_name, memberships.last_name),
        role = CASE WHEN memberships.claimed_role <> excluded.claimed_role
            THEN excluded.role ELSE memberships.role END,
        claimed_role = excluded.claimed_role,
        last_sign_in_at = excluded.last_sign_in_at,
        updated_at = excluded.updated_at"""
# The member as it was (read before the statement's writes), then the organization and the
# membership as the identity provider's event says.
SET_MEMBERSHIP = f"""
    WITH before AS (
        SELECT {MEMBER_COLUMNS} FROM memberships WHERE org_id = $1 AND user_id = $2 FOR UPDATE
    ), organization AS (
        INSERT INTO organizations (org_id, created_at, updated_at) VALUES ($1, $7, $7)
        ON CONFLICT (org_id) DO NOTHING
    ), member AS (
        INSERT INTO memberships (org_id, user_id, email, first_name, last_name, role,
            created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
        ON CONFLICT (org_id, user_id) DO UPDATE SET
            email = coalesce(excluded.email, memberships.email),
            first_name = coalesce(excluded.first_name, memberships.first_name),
            last_name = coalesce(excluded.last_name, memberships.last_name),
            role = excluded.role, claimed_role = NULL, updated_at = excluded.updated_at
    )
    SELECT * FROM before"""
# The invitation becomes accepted and the member takes its role, whether `record_seen` made
# the membership already or does so after; the organization is made too if it is new, as the
# membership refers to it.
ACCEPT_INVITATION = """
    WITH accepted AS (
        UPDATE invitations SET status = 'accepted', accepted_at = $3, accepted_user_id = $2
        WHERE org_id = $1 AND lower(email) = lower($4) AND status = 'pending' AND expires_at > $3
        RETURNING id, email, role, status, inviter_user_id, created_at, expires_at
    ), organization AS (
        INSERT INTO organizations (org_id, created_at, updated_at)
        SELECT $1, $3, $3 FROM accepted ON CONFLICT (org_id) DO NOTHING
    ), member AS (
        INSERT INTO memberships (org_id, user_id, email, first_name, last_name, role,
            last_sign_in_at, created_at, updated_at)
        SELECT $1, $2, $4, $5, $6, a.role, $3, $3, $3 FROM accepted a
        ON CONFLICT (org_id, user_id) DO UPDATE SET
            role = excluded.role, updated_at = excluded.updated_at
    )
    SELECT * FROM accepted"""


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


class PgMemberDirectory:
    """`MemberDirectory` in Postgres: upserts of the organization and the membership (from a
    token, or from the identity provider's membership event), and the acceptance of a pending
    invitation of the local directory."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def record_seen(self, identity: Identity, seen_at: datetime) -> None:
        assert identity.org_id
        await self._db.execute(UPSERT_ORGANIZATION, identity.org_id, seen_at)
        await self._db.execute(
            UPSERT_MEMBERSHIP, identity.org_id, identity.user_id, identity.email,
            identity.first_name, identity.last_name, identity.role or MEMBER_ROLE, seen_at,
        )  # fmt: skip

    async def set_membership(self, membership: MembershipSet, at: datetime) -> Member | None:
        profile = membership.profile
        rows = await self._db.fetch_in_transaction(
            SET_MEMBERSHIP, membership.org_id, membership.user_id, profile.email,
            profile.first_name, profile.last_name, membership.role, at,
        )  # fmt: skip
        return _member(rows[0]) if rows else None

    async def forget(self, org_id: str, user_id: str) -> bool:
        return bool(await self._db.fetch_in_transaction(FORGET_MEMBERSHIP, org_id, user_id))

    async def accept_invitation(self, identity: Identity, at: datetime) -> Invitation | None:
        if not identity.org_id or not identity.email:
            return None
        rows = await self._db.fetch_in_transaction(
            ACCEPT_INVITATION, identity.org_id, identity.user_id, at, identity.email,
            identity.first_name, identity.last_name,
        )  # fmt: skip
        return invitation(rows[0]) if rows else None
