from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from application.ports.audit_log import AuditLog
from application.ports.clock import Clock
from application.ports.identity_directory import IdentityDirectory
from application.ports.unit_of_work import UnitOfWork
from domain.audit import INVITATION_CREATED, NewAuditEntry
from domain.errors import Invalid, field_error
from domain.identity import ADMIN_ROLE, MEMBER_ROLE, Caller
from domain.members import EMAIL, Invitation, require_admin

DEFAULT_EXPIRY_DAYS = 7


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateInvitationCommand:
    caller: Caller
    email: object
    role: object
    expires_in_days: object = None


class CreateInvitation:
    """Invite someone into the caller's organization.

    Rules: only admins (403). `email` is one address of at most 320 characters, `role` is
    `org:admin` or `org:member`, `expiresInDays` 1 to 30 (7 when absent): 400 otherwise. A
    pending invitation for the same e-mail (case-insensitive) is 409. The invitation is
    accepted by the first call of a member whose token carries that e-mail, until it expires.
    Written to the audit log.
    """

    def __init__(
        self, directory: IdentityDirectory, audit: AuditLog, uow: UnitOfWork, clock: Clock
    ) -> None:
        self._directory = directory
        self._audit = audit
        self._uow = uow
        self._clock = clock

    async def execute(self, command: CreateInvitationCommand) -> Invitation:
        caller = command.caller
        require_admin(caller)
        email = command.email
        if not isinstance(email, str) or len(email) > 320 or not EMAIL.fullmatch(email):
            raise Invalid("email must be an e-mail address", [field_error("email", "invalid")])
        if command.role not in (ADMIN_ROLE, MEMBER_ROLE):
            raise Invalid(
                "role must be org:admin or org:member",
                [field_error("role", "org:admin or org:member")],
            )
        days = DEFAULT_EXPIRY_DAYS if command.expires_in_days is None else command.expires_in_days
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 30:
            raise Invalid(
                "expiresInDays must be an integer from 1 to 30",
                [field_error("expiresInDays", "1 to 30")],
            )
        invitation = await self._directory.create_invitation(
            caller.org_id,
            email=email,
            role=command.role,
            inviter_user_id=caller.user_id,
            expires_at=self._clock.now() + timedelta(days=days),
        )
        await self._audit.record(
            NewAuditEntry(
                org_id=caller.org_id,
                actor_user_id=caller.user_id,
                action=INVITATION_CREATED,
                target_type="invitation",
                target_id=invitation.id,
                details={"email": email, "role": command.role},
            )
        )
        await self._uow.commit()
        return invitation
