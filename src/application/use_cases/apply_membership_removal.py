from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from application.ports.audit_log import AuditLog
from application.ports.clock import Clock
from application.ports.member_directory import MemberDirectory
from application.ports.membership_removals import MembershipRemovals
from application.ports.unit_of_work import UnitOfWork
from application.ports.webhook_receipts import WebhookReceipts
from domain.audit import MEMBER_REMOVED_BY_PROVIDER, NewAuditEntry
from domain.members import MembershipRemoved


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyMembershipRemovalCommand:
    message_id: str
    removal: MembershipRemoved | None
    sent_at: datetime | None = None


class ApplyMembershipRemoval:
    """Act on a verified identity-provider webhook message, once.

    Rules: a message id seen before is a redelivery and changes nothing (False). A removal
    deletes the member's local record with its metadata, records when it happened (when the
    provider sent it, never later than now: a redelivery days later must not refuse tokens of
    a re-addition made meanwhile; every token of that user for that organization issued until
    then is refused from now on) and is
    written to the audit log with no acting user; the receipt and all of it commit together,
    so a failure lets the provider's redelivery finish the job.
    """

    def __init__(
        self,
        members: MemberDirectory,
        removals: MembershipRemovals,
        receipts: WebhookReceipts,
        audit: AuditLog,
        uow: UnitOfWork,
        clock: Clock,
    ) -> None:
        self._members = members
        self._removals = removals
        self._receipts = receipts
        self._audit = audit
        self._uow = uow
        self._clock = clock

    async def execute(self, command: ApplyMembershipRemovalCommand) -> bool:
        now = self._clock.now()
        if not await self._receipts.first_time(command.message_id, now):
            return False
        removal = command.removal
        if removal is not None:
            removed_at = min(command.sent_at or now, now)
            await self._members.forget(removal.org_id, removal.user_id)
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
        await self._uow.commit()
        return True
