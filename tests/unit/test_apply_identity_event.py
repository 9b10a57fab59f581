"""An identity-provider event, applied once: a removal dated when the provider sent it (never
later than now), and an event that changes nothing writes nothing."""

from __future__ import annotations

from datetime import timedelta

from application.use_cases.apply_identity_event import (
    ApplyIdentityEvent,
    ApplyIdentityEventCommand,
)
from domain.identity import ADMIN_ROLE, MEMBER_ROLE, Identity
from domain.members import (
    IdentityEvent,
    MembershipRemoved,
    MembershipSet,
    Profile,
    UserDeleted,
    UserUpdated,
)
from tests.fakes import FakeUnitOfWork
from tests.fakes.basics import FakeClock, FakeMemberDirectory
from tests.fakes.members import (
    FakeAuditLog,
    FakeIdentityDirectory,
    FakeMembershipRemovals,
    FakeUserMemberships,
    FakeWebhookReceipts,
)

REMOVAL = MembershipRemoved(org_id="org_a", user_id="user_ann")


class World:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.directory = FakeIdentityDirectory(self.clock)
        self.members = FakeMemberDirectory(self.directory)
        self.removals, self.receipts = FakeMembershipRemovals(), FakeWebhookReceipts()
        self.audit = FakeAuditLog(self.clock)
        users = FakeUserMemberships(self.directory, self.removals, self.audit)
        uow = FakeUnitOfWork(self.directory, self.removals, self.receipts, self.audit)
        self.use_case = ApplyIdentityEvent(
            self.members, users, self.removals, self.receipts, self.audit, uow, self.clock
        )
        self._n = 0

    async def apply(self, event: IdentityEvent | None, **kw) -> bool:
        self._n += 1
        command = ApplyIdentityEventCommand(message_id=f"msg_{self._n}", event=event, **kw)
        return await self.use_case.execute(command)

    def actions(self, org_id: str = "org_a") -> list[tuple[str, str, dict]]:
        return [(e.action, e.target_id, e.details) for e in self.audit.of(org_id)]


async def test_a_late_delivery_is_dated_when_it_was_sent():
    world = World()
    world.directory.add_member("org_a", "user_ann")
    sent = world.clock.now() - timedelta(days=2)
    command = ApplyIdentityEventCommand(message_id="msg_1", event=REMOVAL, sent_at=sent)
    assert await world.use_case.execute(command) is True
    assert await world.removals.removed_at("org_a", "user_ann") == sent
    assert world.members.forgotten == [("org_a", "user_ann")]
    assert world.actions() == [("member.removed_by_identity_provider", "user_ann", {})]
    assert await world.use_case.execute(command) is False  # a redelivery changes nothing
    assert len(world.audit.entries) == 1


async def test_a_time_from_the_future_is_now():
    world = World()
    world.directory.add_member("org_a", "user_ann")
    await world.apply(REMOVAL, sent_at=world.clock.now() + timedelta(minutes=4))
    assert await world.removals.removed_at("org_a", "user_ann") == world.clock.now()


async def test_removing_someone_who_is_not_a_member_writes_nothing():
    world = World()
    world.directory.add_member("org_b", "user_ann")
    assert await world.apply(REMOVAL) is True
    assert world.audit.entries == []
    assert world.removals.removals == {}
    assert await world.apply(UserDeleted(user_id="user_nobody")) is True
    assert world.audit.entries == [] and world.removals.removals == {}


async def test_a_membership_event_sets_the_role_and_audits_only_a_change():
    world = World()
    made = MembershipSet(
        org_id="org_a", user_id="user_ann", role=ADMIN_ROLE, profile=Profile(email="ann@a.test")
    )
    await world.apply(made)
    (ann,) = await world.directory.list_members("org_a")
    assert (ann.role, ann.email) == (ADMIN_ROLE, "ann@a.test")
    await world.apply(made)  # the same again (another message): nothing changes
    await world.apply(MembershipSet(org_id="org_a", user_id="user_ann", role=MEMBER_ROLE))
    (ann,) = await world.directory.list_members("org_a")
    assert (ann.role, ann.email) == (MEMBER_ROLE, "ann@a.test")
    assert world.actions() == [
        (
            "member.role_set_by_identity_provider",
            "user_ann",
            {"roleBefore": None, "roleAfter": ADMIN_ROLE},
        ),
        (
            "member.role_set_by_identity_provider",
            "user_ann",
            {"roleBefore": ADMIN_ROLE, "roleAfter": MEMBER_ROLE},
        ),
    ]


async def test_a_role_set_by_the_provider_stays_until_the_tokens_claim_changes():
    world = World()
    token = Identity(user_id="user_ann", org_id="org_a", role=MEMBER_ROLE)
    await world.members.record_seen(token, world.clock.now())
    await world.apply(MembershipSet(org_id="org_a", user_id="user_ann", role=ADMIN_ROLE))
    await world.members.record_seen(token, world.clock.now())  # an older claim, seen again
    assert (await world.directory.get_member("org_a", "user_ann")).role == ADMIN_ROLE


async def test_user_events_reach_every_organization_of_the_user():
    world = World()
    for org in ("org_a", "org_b"):
        world.directory.add_member(org, "user_ann", email="old@a.test")
    world.directory.add_member("org_a", "user_bob", email="bob@a.test")
    profile = Profile(email="ann@a.test", first_name="Ann", last_name="Lee")
    await world.apply(UserUpdated(user_id="user_ann", profile=profile))
    for org in ("org_a", "org_b"):
        ann = await world.directory.get_member(org, "user_ann")
        assert ann is not None and (ann.email, ann.first_name, ann.last_name) == (
            "ann@a.test", "Ann", "Lee",
        )  # fmt: skip
    assert world.audit.entries == []
    await world.apply(UserDeleted(user_id="user_ann"), sent_at=world.clock.now())
    assert [m.id for m in await world.directory.list_members("org_a")] == ["user_bob"]
    assert await world.directory.list_members("org_b") == []
    for org in ("org_a", "org_b"):
        assert world.actions(org) == [("member.removed_by_identity_provider", "user_ann", {})]
        assert await world.removals.removed_at(org, "user_ann") == world.clock.now()
