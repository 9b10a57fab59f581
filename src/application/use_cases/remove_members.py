from __future__ import annotations

from dataclasses import dataclass, field

from application.ports.audit_log import AuditLog
from application.ports.clock import Clock
from application.ports.identity_directory import DirectoryUnavailable, IdentityDirectory
from application.ports.membership_removals import MembershipRemovals
from application.ports.unit_of_work import UnitOfWork
from domain.audit import INVITATION_REVOKED, MEMBER_REMOVED, NewAuditEntry
from domain.errors import Invalid, field_error
from domain.identity import Caller
from domain.members import (
    CANNOT_REMOVE_SELF,
    MAX_REMOVALS,
    Outcome,
    check_id_list,
    is_invitation_id,
    is_user_id,
    require_admin,
)

INVITATION_NOT_PENDING = "Invitation not found or not pending"


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveMembersCommand:
    caller: Caller
    user_ids: list[str]
    invitation_ids: list[str]

    @classmethod
    def parse(
        cls, *, caller: Caller, user_ids: object = None, invitation_ids: object = None
    ) -> RemoveMembersCommand:
        """Who, then what: an admin's request (403 otherwise); 1 to 50 ids in all, each a
        well-formed user (or invitation) id, none repeated; the caller's own id anywhere is 400
        "You cannot remove yourself"."""
        require_admin(caller)
        users = _ids(user_ids, "userIds", is_user_id)
        invitations = _ids(invitation_ids, "invitationIds", is_invitation_id)
        if not 1 <= len(users) + len(invitations) <= MAX_REMOVALS:
            raise Invalid(
                f"Send 1 to {MAX_REMOVALS} ids in all",
                [field_error("userIds", f"1 to {MAX_REMOVALS} ids with invitationIds")],
            )
        if caller.user_id in users:
            raise Invalid(CANNOT_REMOVE_SELF, [field_error("userIds", "holds your own id")])
        return cls(caller=caller, user_ids=users, invitation_ids=invitations)


@dataclass(frozen=True, slots=True, kw_only=True)
class Removals:
    """How each entry went, users and invitations apart, in the order asked."""

    users: list[Outcome] = field(default_factory=list)
    invitations: list[Outcome] = field(default_factory=list)


class RemoveMembers:
    """Remove members from the caller's organization and revoke invitations (agent-platform-api.md
    §4.9, §4.10).

    Rules: only admins (403); the ids are parsed as `RemoveMembersCommand.parse` says, and a
    request they refuse does nothing. Each entry is independent: a user who is not
    a member, or an invitation that is not pending, is a failure entry, and the others still
    happen. A removal deletes the membership with its organization-scoped metadata and is
    recorded with its time, so that every token of that user for this organization issued
    until then is refused from now on, in every server process. Every removal and revocation
    is written to the audit log in the same transaction.
    """

    def __init__(
        self,
        directory: IdentityDirectory,
        removals: MembershipRemovals,
        audit: AuditLog,
        uow: UnitOfWork,
        clock: Clock,
    ) -> None:
        self._directory = directory
        self._removals = removals
        self._audit = audit
        self._uow = uow
        self._clock = clock

    async def execute(self, command: RemoveMembersCommand) -> Removals:
        caller = command.caller
        require_admin(caller)
        user_ids, invitation_ids = command.user_ids, command.invitation_ids
        org_id = caller.org_id
        users = await self._directory.remove_members(org_id, user_ids) if user_ids else []
        now = self._clock.now()
        for outcome in users:
            if outcome.success:
                await self._removals.record(org_id, outcome.id, now)
                await self._log(caller, MEMBER_REMOVED, "user", outcome.id)
        invitations = []
        for invitation_id in invitation_ids:
            try:
                revoked = await self._directory.revoke_invitation(org_id, invitation_id)
            except DirectoryUnavailable as failure:
                invitations.append(Outcome(id=invitation_id, error=failure.message))
                continue
            if revoked:
                invitations.append(Outcome(id=invitation_id))
                await self._log(caller, INVITATION_REVOKED, "invitation", invitation_id)
            else:
                invitations.append(Outcome(id=invitation_id, error=INVITATION_NOT_PENDING))
        await self._uow.commit()
        return Removals(users=users, invitations=invitations)

    async def _log(self, caller: Caller, action: str, target_type: str, target_id: str) -> None:
        await self._audit.record(
            NewAuditEntry(
                org_id=caller.org_id,
                actor_user_id=caller.user_id,
                action=action,
                target_type=target_type,
                target_id=target_id,
            )
        )


def _ids(values: object, field_name: str, valid: object) -> list[str]:
    if values is None:
        return []
    return check_id_list(values, field_name=field_name, valid=valid, minimum=0)
