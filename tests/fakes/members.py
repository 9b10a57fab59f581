"""Fakes of the members ports in memory: the identity directory (members and invitations, with
the local directory's rules), the audit log, membership removals, webhook receipts and a user's
memberships across organizations."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from application.ports.identity_directory import DirectoryUnavailable
from domain.audit import MEMBER_REMOVED_BY_PROVIDER, AuditEntry, NewAuditEntry
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
    Profile,
)
from tests.fakes.basics import FakeClock

if TYPE_CHECKING:
    from application.ports.audit_log import AuditLog
    from application.ports.clock import Clock
    from application.ports.identity_directory import IdentityDirectory
    from application.ports.membership_removals import MembershipRemovals
    from application.ports.user_memberships import UserMemberships
    from application.ports.webhook_receipts import WebhookReceipts
    from tests.fakes.basics import Restorable


DirectoryState = tuple[
    dict[tuple[str, str], Member],
    dict[str, tuple[str, Invitation]],
    int,
    dict[tuple[str, str], str | None],
]


class FakeIdentityDirectory:
    """Members by (organization, user id) and invitations by id (with their organization),
    as stored: a pending invitation past its expiry (by `clock`) reads `expired`. Set
    `unavailable` to a message to make every call raise `DirectoryUnavailable`."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or FakeClock()
        self.members: dict[tuple[str, str], Member] = {}
        self.invitations: dict[str, tuple[str, Invitation]] = {}
        # The role each member's last token claimed (None: none since a membership event).
        self.claimed: dict[tuple[str, str], str | None] = {}
        self.unavailable: str | None = None
        self._next = 1

    def snapshot(self) -> DirectoryState:
        return copy.deepcopy((self.members, self.invitations, self._next, self.claimed))

    def restore(self, saved: DirectoryState) -> None:
        self.members, self.invitations, self._next, self.claimed = copy.deepcopy(saved)

    def add_member(
        self,
        org_id: str,
        user_id: str,
        *,
        email: str | None = None,
        public_metadata: dict[str, Any] | None = None,
        role: str = MEMBER_ROLE,
    ) -> Member:
        """Arrange a member of `org_id`."""
        member = Member(id=user_id, email=email, first_name=None, last_name=None,
                        public_metadata=public_metadata or {}, role=role)  # fmt: skip
        self.members[(org_id, user_id)] = member
        return member

    def see(self, identity: Identity, seen_at: datetime) -> None:
        """What `record_seen` does to the local directory: the member made or refreshed from the
        token's claims, its metadata untouched, its role the claim's when the member is new or
        the claim differs from the one remembered."""
        assert identity.org_id
        key = (identity.org_id, identity.user_id)
        old = self.members.get(key)
        claim = identity.role or MEMBER_ROLE
        remembered = self.claimed.get(key)
        self.claimed[key] = claim
        role = old.role if old and (remembered is None or remembered == claim) else claim
        self.members[key] = Member(
            id=identity.user_id,
            email=identity.email or (old.email if old else None),
            first_name=identity.first_name or (old.first_name if old else None),
            last_name=identity.last_name or (old.last_name if old else None),
            public_metadata=old.public_metadata if old else {},
            last_sign_in_at=seen_at,
            role=role,
        )

    def set_membership(self, membership: MembershipSet) -> Member | None:
        """What `set_membership` does to the local directory; the member as it was."""
        key = (membership.org_id, membership.user_id)
        old, profile = self.members.get(key), membership.profile
        self.members[key] = Member(
            id=membership.user_id,
            email=profile.email or (old.email if old else None),
            first_name=profile.first_name or (old.first_name if old else None),
            last_name=profile.last_name or (old.last_name if old else None),
            public_metadata=old.public_metadata if old else {},
            last_sign_in_at=old.last_sign_in_at if old else None,
            role=membership.role,
        )
        self.claimed[key] = None
        return old

    def accept(self, identity: Identity, at: datetime) -> Invitation | None:
        """What `accept_invitation` does to the local directory."""
        if not identity.org_id or not identity.email:
            return None
        for invitation_id, (org_id, found) in self.invitations.items():
            if (
                org_id == identity.org_id
                and found.email.casefold() == identity.email.casefold()
                and found.status is InvitationStatus.PENDING
                and found.expires_at > at
            ):
                accepted = dataclasses.replace(found, status=InvitationStatus.ACCEPTED)
                self.invitations[invitation_id] = (org_id, accepted)
                key = (org_id, identity.user_id)
                if key in self.members:
                    self.members[key] = dataclasses.replace(self.members[key], role=found.role)
                else:
                    self.see(dataclasses.replace(identity, role=found.role), at)
                    self.claimed[key] = None
                return accepted
        return None

    def _check(self) -> None:
        if self.unavailable is not None:
            raise DirectoryUnavailable(self.unavailable)

    def _read(self, invitation: Invitation) -> Invitation:
        if invitation.status is InvitationStatus.PENDING and (
            invitation.expires_at <= self.clock.now()
        ):
            return dataclasses.replace(invitation, status=InvitationStatus.EXPIRED)
        return invitation

    async def list_members(self, org_id: str) -> list[Member]:
        self._check()
        return [m for (org, _), m in self.members.items() if org == org_id]

    async def get_member(self, org_id: str, user_id: str) -> Member | None:
        self._check()
        return self.members.get((org_id, user_id))

    async def replace_metadata(
        self, org_id: str, user_id: str, metadata: dict[str, Any]
    ) -> Member | None:
        self._check()
        member = self.members.get((org_id, user_id))
        if member is None:
            return None
        replaced = dataclasses.replace(member, public_metadata=copy.deepcopy(metadata))
        self.members[(org_id, user_id)] = replaced
        return replaced

    async def remove_member(self, org_id: str, user_id: str) -> bool:
        self._check()
        return self.members.pop((org_id, user_id), None) is not None

    async def remove_members(self, org_id: str, user_ids: Sequence[str]) -> list[Outcome]:
        self._check()
        return [
            Outcome(id=u, error=None if self.members.pop((org_id, u), None) else NOT_A_MEMBER)
            for u in user_ids
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
        self._check()
        for org, found in self.invitations.values():
            if (
                org == org_id
                and found.email.casefold() == email.casefold()
                and self._read(found).status is InvitationStatus.PENDING
            ):
                raise Conflict(INVITATION_PENDING)
        invitation = Invitation(
            id=f"inv_{self._next:024d}",
            email=email,
            role=role,
            status=InvitationStatus.PENDING,
            inviter_user_id=inviter_user_id,
            created_at=self.clock.now(),
            expires_at=expires_at,
        )
        self._next += 1
        self.invitations[invitation.id] = (org_id, invitation)
        return invitation

    async def list_invitations(self, org_id: str) -> list[Invitation]:
        self._check()
        found = [self._read(i) for org, i in self.invitations.values() if org == org_id]
        return sorted(found, key=lambda i: (i.created_at, i.id), reverse=True)

    async def revoke_invitation(self, org_id: str, invitation_id: str) -> bool:
        self._check()
        org, found = self.invitations.get(invitation_id, ("", None))
        if found is None or org != org_id:
            return False
        if self._read(found).status is not InvitationStatus.PENDING:
            return False
        revoked = dataclasses.replace(found, status=InvitationStatus.REVOKED)
        self.invitations[invitation_id] = (org, revoked)
        return True


class FakeAuditLog:
    """Entries in the order they were recorded, each with its organization; `clock` dates them."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or FakeClock()
        self.entries: list[tuple[str, AuditEntry]] = []

    def snapshot(self) -> list[tuple[str, AuditEntry]]:
        return list(self.entries)

    def restore(self, saved: list[tuple[str, AuditEntry]]) -> None:
        self.entries = list(saved)

    def of(self, org_id: str) -> list[AuditEntry]:
        """The organization's entries, oldest first."""
        return [entry for org, entry in self.entries if org == org_id]

    async def record(self, entry: NewAuditEntry) -> None:
        recorded = AuditEntry(
            id=len(self.entries) + 1,
            at=self.clock.now(),
            actor_user_id=entry.actor_user_id,
            action=entry.action,
            target_type=entry.target_type,
            target_id=entry.target_id,
            details=copy.deepcopy(entry.details),
        )
        self.entries.append((entry.org_id, recorded))

    async def page(self, org_id: str, *, limit: int, before_id: int | None) -> list[AuditEntry]:
        newest_first = reversed(self.of(org_id))
        found = [e for e in newest_first if before_id is None or e.id < before_id]
        return found[:limit]


class FakeMembershipRemovals:
    def __init__(self) -> None:
        self.removals: dict[tuple[str, str], datetime] = {}

    def snapshot(self) -> dict[tuple[str, str], datetime]:
        return dict(self.removals)

    def restore(self, saved: dict[tuple[str, str], datetime]) -> None:
        self.removals = dict(saved)

    async def record(self, org_id: str, user_id: str, removed_at: datetime) -> None:
        key = (org_id, user_id)
        self.removals[key] = max(removed_at, self.removals.get(key, removed_at))

    async def removed_at(self, org_id: str, user_id: str) -> datetime | None:
        return self.removals.get((org_id, user_id))


class FakeWebhookReceipts:
    def __init__(self) -> None:
        self.received: dict[str, datetime] = {}

    def snapshot(self) -> dict[str, datetime]:
        return dict(self.received)

    def restore(self, saved: dict[str, datetime]) -> None:
        self.received = dict(saved)

    async def first_time(self, message_id: str, received_at: datetime) -> bool:
        if message_id in self.received:
            return False
        self.received[message_id] = received_at
        return True


class FakeUserMemberships:
    """A user's memberships across organizations, in the fakes of the directory, the removals
    and the audit log it is given (which hold its state)."""

    def __init__(
        self,
        directory: FakeIdentityDirectory,
        removals: FakeMembershipRemovals,
        audit: FakeAuditLog,
    ) -> None:
        self.directory = directory
        self.removals = removals
        self.audit = audit

    async def update_profile(self, user_id: str, profile: Profile) -> list[str]:
        changed = []
        for (org_id, member_id), member in list(self.directory.members.items()):
            updated = dataclasses.replace(
                member,
                email=profile.email,
                first_name=profile.first_name,
                last_name=profile.last_name,
            )
            if member_id == user_id and updated != member:
                self.directory.members[(org_id, member_id)] = updated
                changed.append(org_id)
        return sorted(changed)

    async def remove_everywhere(self, user_id: str, removed_at: datetime) -> list[str]:
        orgs = sorted(org for org, member_id in self.directory.members if member_id == user_id)
        for org_id in orgs:
            del self.directory.members[(org_id, user_id)]
            await self.removals.record(org_id, user_id, removed_at)
            await self.audit.record(
                NewAuditEntry(
                    org_id=org_id,
                    actor_user_id=None,
                    action=MEMBER_REMOVED_BY_PROVIDER,
                    target_type="user",
                    target_id=user_id,
                )
            )
        return orgs


if TYPE_CHECKING:  # mypy checks each fake against the port it stands in for
    _directory: IdentityDirectory = FakeIdentityDirectory()
    _directory_store: Restorable[DirectoryState] = FakeIdentityDirectory()
    _audit: AuditLog = FakeAuditLog()
    _audit_store: Restorable[list[tuple[str, AuditEntry]]] = FakeAuditLog()
    _removals: MembershipRemovals = FakeMembershipRemovals()
    _removals_store: Restorable[dict[tuple[str, str], datetime]] = FakeMembershipRemovals()
    _receipts: WebhookReceipts = FakeWebhookReceipts()
    _users: UserMemberships = FakeUserMemberships(
        FakeIdentityDirectory(), FakeMembershipRemovals(), FakeAuditLog()
    )
    _receipts_store: Restorable[dict[str, datetime]] = FakeWebhookReceipts()
