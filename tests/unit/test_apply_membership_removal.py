"""A webhook's removal, applied once, dated when the provider sent it (never later than now)."""

from __future__ import annotations

from datetime import timedelta

from application.use_cases.apply_membership_removal import (
    ApplyMembershipRemoval,
    ApplyMembershipRemovalCommand,
)
from domain.members import MembershipRemoved
from tests.fakes import FakeUnitOfWork
from tests.fakes.basics import FakeClock, FakeMemberDirectory
from tests.fakes.members import FakeAuditLog, FakeMembershipRemovals, FakeWebhookReceipts

REMOVAL = MembershipRemoved(org_id="org_a", user_id="user_ann")


def world():
    clock = FakeClock()
    members, removals = FakeMemberDirectory(), FakeMembershipRemovals()
    receipts, audit = FakeWebhookReceipts(), FakeAuditLog(clock)
    uow = FakeUnitOfWork(removals, receipts, audit)
    use_case = ApplyMembershipRemoval(members, removals, receipts, audit, uow, clock)
    return use_case, clock, members, removals, audit


async def test_a_late_delivery_is_dated_when_it_was_sent():
    use_case, clock, members, removals, audit = world()
    sent = clock.now() - timedelta(days=2)
    command = ApplyMembershipRemovalCommand(message_id="msg_1", removal=REMOVAL, sent_at=sent)
    assert await use_case.execute(command) is True
    assert await removals.removed_at("org_a", "user_ann") == sent
    assert members.forgotten == [("org_a", "user_ann")]
    assert [e.action for _, e in audit.entries] == ["member.removed_by_identity_provider"]
    assert await use_case.execute(command) is False  # a redelivery changes nothing
    assert len(audit.entries) == 1


async def test_a_time_from_the_future_is_now():
    use_case, clock, _, removals, _ = world()
    future = clock.now() + timedelta(minutes=4)
    await use_case.execute(
        ApplyMembershipRemovalCommand(message_id="msg_2", removal=REMOVAL, sent_at=future)
    )
    assert await removals.removed_at("org_a", "user_ann") == clock.now()
