from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from application.ports.audit_log import AuditLog
from application.ports.clock import Clock
from application.ports.identity_directory import IdentityDirectory
from application.ports.unit_of_work import UnitOfWork
from domain.audit import INVITATION_CREATED, NewAuditEntry
from domain.identity import Caller
from domain.members import (
    Invitation,
    parse_email,
    parse_expiry_days,
    parse_invited_role,
    require_admin,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateInvitationCommand:
    caller: Caller
    email: str
    role: str
    expires_in_days: int

    @classmethod
    def parse(
        cls, *, caller: Caller, email: object, role: object, expires_in_days: object = None
    ) -> CreateInvitationCommand:
        """Who, then what: an admin's request (403 otherwise); `email` one address of at most
        320 characters, `role` `org:admin` or `org:member`, `expiresInDays` 1 to 30 (7 when
        absent): 400 otherwise."""
        require_admin(caller)
        return cls(
            caller=caller,
            email=parse_email(email),
            role=parse_invited_role(role),
            expires_in_days=parse_expiry_days(expires_in_days),
        )


class CreateInvitation:
    """Invite someone into the caller's organization.

    Rules: only admins (403). A pending invitation for the same e-mail (case-insensitive) is 409.
    The invitation is accepted by the first call of a member whose token carries that e-mail, until
    it expires. Written to the audit log.
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
        email, days = command.email, command.expires_in_days
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
