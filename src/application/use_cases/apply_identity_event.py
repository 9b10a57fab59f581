from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from application.ports.audit_log import AuditLog
from application.ports.clock import Clock
from application.ports.member_directory import MemberDirectory
from application.ports.membership_removals import MembershipRemovals
from application.ports.unit_of_work import UnitOfWork
from application.ports.user_memberships import UserMemberships
from application.ports.webhook_receipts import WebhookReceipts
from domain.audit import MEMBER_REMOVED_BY_PROVIDER, MEMBER_ROLE_SET_BY_PROVIDER, NewAuditEntry
from domain.members import (
    IdentityEvent,
    MembershipRemoved,
    MembershipSet,
    UserDeleted,
    UserUpdated,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyIdentityEventCommand:
    message_id: str
    event: IdentityEvent | None
    sent_at: datetime | None = None


class ApplyIdentityEvent:
    """Act on a verified identity-provider webhook message, once.

    Rules: a message id seen before is a redelivery and changes nothing (False). An event that
    changes nothing writes nothing but its receipt: no audit entry, no removal.
    - A membership removed: when the user was a member, their local record goes with its
      metadata, the removal is recorded (dated when the provider sent it, never later than
      now: a redelivery days later must not refuse tokens of a re-addition made meanwhile;
      every token of that user for that organization issued until then is refused from now
      on) and written to the audit log with no acting user.
    - A membership made or changed: the member is added or takes the event's role (and the
      e-mail and names it carries); a new member or a changed role is written to the audit
      log with no acting user, the roles before and after in its details.
    - A user changed: their e-mail and names in every organization they are a member of.
    - A user deleted: removed from every organization they are a member of, each removal as
      a membership removed (recorded, audited in its organization).
    The receipt and all of it commit together, so a failure lets the provider's redelivery
    finish the job.
    """

    def __init__(
        self,
        members: MemberDirectory,
        users: UserMemberships,
        removals: MembershipRemovals,
        receipts: WebhookReceipts,
        audit: AuditLog,
        uow: UnitOfWork,
        clock: Clock,
    ) -> None:
        self._members = members
        self._users = users
        self._removals = removals
        self._receipts = receipts
        self._audit = audit
        self._uow = uow
        self._clock = clock

    async def execute(self, command: ApplyIdentityEventCommand) -> bool:
        now = self._clock.now()
        if not await self._receipts.first_time(command.message_id, now):
            return False
        event = command.event
        removed_at = min(command.sent_at or now, now)
        if isinstance(event, MembershipRemoved):
            await self._remove(event, removed_at)
        elif isinstance(event, MembershipSet):
            await self._set(event, now)
        elif isinstance(event, UserUpdated):
            await self._users.update_profile(event.user_id, event.profile)
        elif isinstance(event, UserDeleted):
            await self._users.remove_everywhere(event.user_id, removed_at)
        await self._uow.commit()
        return True

    async def _remove(self, removal: MembershipRemoved, removed_at: datetime) -> None:
        if not await self._members.forget(removal.org_id, removal.user_id):
            return
        await self._removals.record(removal.org_id, removal.user_id, removed_at)
        await self._audit.record(
            NewAuditEntry(
                org_id=removal.org_id,
                actor_user_id=None,
                action=MEMBER_REMOVED_BY_PROVIDER,
                target_type="user",
                target_id=removal.user_id,
            )
        )

    async def _set(self, membership: MembershipSet, now: datetime) -> None:
        before = await self._members.set_membership(membership, now)
        role_before = before.role if before is not None else None
        if before is not None and role_before == membership.role:
            return  # e-mail or names alone are no administrative change
        await self._audit.record(
            NewAuditEntry(
                org_id=membership.org_id,
                actor_user_id=None,
                action=MEMBER_ROLE_SET_BY_PROVIDER,
                target_type="user",
                target_id=membership.user_id,
                details={"roleBefore": role_before, "roleAfter": membership.role},
            )
        )
