"""The local identity directory and its neighbours against the real database: members and
their organization-scoped metadata, invitations and their acceptance, the role a token's claim
or the identity provider's event sets, the audit log, membership removals, webhook receipts and
a user's memberships across organizations, each organization seeing only its own rows."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from sqlalchemy import text

from adapters.postgres.audit_log import PgAuditLog
from adapters.postgres.database import org_connection
from adapters.postgres.members import INVITATION_PENDING, PgIdentityDirectory, PgMemberDirectory
from adapters.postgres.membership_removals import PgMembershipRemovals
from adapters.postgres.user_memberships import PgUserMemberships
from adapters.postgres.webhook_receipts import PgWebhookReceipts, prune_webhook_receipts
from domain.audit import MEMBER_REMOVED, MEMBER_REMOVED_BY_PROVIDER, NewAuditEntry
from domain.errors import Conflict
from domain.identity import ADMIN_ROLE, MEMBER_ROLE, Identity
from domain.members import (
    INVITATION_ID,
    NOT_A_MEMBER,
    InvitationStatus,
    Member,
    MembershipSet,
    Outcome,
    Profile,
)

pytestmark = pytest.mark.usefixtures("clean")

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def now() -> datetime:
    return datetime.now(UTC)


async def seen(app_pool, org: str, user: str, role: str = MEMBER_ROLE, **claims) -> None:
    identity = Identity(user_id=user, org_id=org, role=role, **claims)
    async with org_connection(app_pool, org) as db:
        await PgMemberDirectory(db).record_seen(identity, T0)
        await db.commit()


async def invite(app_pool, org: str, email: str, days: float = 7, role: str = ADMIN_ROLE):
    async with org_connection(app_pool, org) as db:
        created = await PgIdentityDirectory(db).create_invitation(
            org, email=email, role=role, inviter_user_id="user_admin",
            expires_at=now() + timedelta(days=days),
        )  # fmt: skip
        await db.commit()
    return created


async def test_members_are_the_memberships_of_each_organization_alone(app_pool):
    await seen(app_pool, "org_a", "user_a1", ADMIN_ROLE, email="a1@x.io", first_name="Ada")
    await seen(app_pool, "org_a", "user_a2")
    await seen(app_pool, "org_b", "user_b1")
    async with org_connection(app_pool, "org_a") as db:
        directory = PgIdentityDirectory(db)
        members = await directory.list_members("org_a")
        assert await directory.list_members("org_b") == []
        assert await directory.get_member("org_b", "user_b1") is None
        assert await directory.replace_metadata("org_b", "user_b1", {"k": 1}) is None
        assert await directory.remove_member("org_b", "user_b1") is False
    assert members[0] == Member(
        id="user_a1", email="a1@x.io", first_name="Ada", last_name=None, public_metadata={},
        last_sign_in_at=T0, role=ADMIN_ROLE,
    )  # fmt: skip
    assert [m.id for m in members] == ["user_a1", "user_a2"]
    async with org_connection(app_pool, "org_b") as db:
        assert [m.id for m in await PgIdentityDirectory(db).list_members("org_b")] == ["user_b1"]


async def test_metadata_is_replaced_whole_and_goes_with_the_membership(app_pool):
    await seen(app_pool, "org_a", "user_1", email="u@x.io")
    await seen(app_pool, "org_b", "user_1", email="u@x.io")
    async with org_connection(app_pool, "org_a") as db:
        directory = PgIdentityDirectory(db)
        await directory.replace_metadata("org_a", "user_1", {"team": "a", "level": 3})
        replaced = await directory.replace_metadata(
            "org_a", "user_1", {"tags": [1, "x", None], "nested": {"k": True}}
        )
        await db.commit()
    assert replaced is not None
    assert replaced.public_metadata == {"tags": [1, "x", None], "nested": {"k": True}}
    async with org_connection(app_pool, "org_b") as db:
        await PgIdentityDirectory(db).replace_metadata("org_b", "user_1", {"team": "b"})
        await db.commit()

    async with org_connection(app_pool, "org_a") as db:
        directory = PgIdentityDirectory(db)
        assert await directory.remove_member("org_a", "user_1") is True
        assert await directory.remove_member("org_a", "user_1") is False
        assert await directory.get_member("org_a", "user_1") is None
        await db.commit()
    await seen(app_pool, "org_a", "user_1", email="u@x.io")
    async with org_connection(app_pool, "org_a") as db:
        again = await PgIdentityDirectory(db).get_member("org_a", "user_1")
    assert again is not None and again.public_metadata == {}
    async with org_connection(app_pool, "org_b") as db:
        other = await PgIdentityDirectory(db).get_member("org_b", "user_1")
    assert other is not None and other.public_metadata == {"team": "b"}


async def test_removing_several_members_reports_each_in_order(app_pool):
    await seen(app_pool, "org_a", "user_1")
    await seen(app_pool, "org_a", "user_2")
    await seen(app_pool, "org_b", "user_3")
    async with org_connection(app_pool, "org_a") as db:
        directory = PgIdentityDirectory(db)
        outcomes = await directory.remove_members("org_a", ["user_2", "user_3", "user_1"])
        assert await directory.remove_members("org_a", []) == []
        await db.commit()
        assert await directory.list_members("org_a") == []
    assert outcomes == [
        Outcome(id="user_2"), Outcome(id="user_3", error=NOT_A_MEMBER), Outcome(id="user_1"),
    ]  # fmt: skip


async def test_one_pending_invitation_per_email_whatever_its_case(app_pool):
    first = await invite(app_pool, "org_a", "Bob@Example.com")
    assert INVITATION_ID.fullmatch(first.id) and len(first.id) == 28
    assert (first.email, first.role, first.status) == (
        "Bob@Example.com", ADMIN_ROLE, InvitationStatus.PENDING,
    )  # fmt: skip
    assert first.inviter_user_id == "user_admin" and first.created_at <= first.expires_at
    async with org_connection(app_pool, "org_a") as db:
        directory = PgIdentityDirectory(db)
        with pytest.raises(Conflict, match=INVITATION_PENDING):
            await directory.create_invitation(
                "org_a", email="bob@example.COM", role=MEMBER_ROLE, inviter_user_id="user_x",
                expires_at=now() + timedelta(days=1),
            )  # fmt: skip
        # The clash leaves the transaction usable.
        assert [i.id for i in await directory.list_invitations("org_a")] == [first.id]
    assert (await invite(app_pool, "org_b", "bob@example.com")).id != first.id
    async with org_connection(app_pool, "org_b") as db:
        assert len(await PgIdentityDirectory(db).list_invitations("org_a")) == 0


async def test_invitations_read_newest_first_with_their_status(app_pool):
    expired = await invite(app_pool, "org_a", "old@x.io", days=-1)
    revoked = await invite(app_pool, "org_a", "gone@x.io")
    pending = await invite(app_pool, "org_a", "new@x.io")
    assert expired.status is InvitationStatus.EXPIRED
    async with org_connection(app_pool, "org_a") as db:
        directory = PgIdentityDirectory(db)
        assert await directory.revoke_invitation("org_a", revoked.id) is True
        assert await directory.revoke_invitation("org_a", revoked.id) is False
        assert await directory.revoke_invitation("org_a", expired.id) is False
        assert await directory.revoke_invitation("org_a", "inv_unknown") is False
        await db.commit()
        listed = await directory.list_invitations("org_a")
    assert [(i.id, i.status) for i in listed] == [
        (pending.id, InvitationStatus.PENDING),
        (revoked.id, InvitationStatus.REVOKED),
        (expired.id, InvitationStatus.EXPIRED),
    ]
    async with org_connection(app_pool, "org_b") as db:
        assert await PgIdentityDirectory(db).revoke_invitation("org_a", pending.id) is False
    # An expired invitation does not hold its e-mail; a revoked one does not either.
    again = await invite(app_pool, "org_a", "OLD@x.io")
    await invite(app_pool, "org_a", "gone@x.io")
    async with org_connection(app_pool, "org_a") as db:
        statuses = {i.id: i.status for i in await PgIdentityDirectory(db).list_invitations("org_a")}
    assert statuses[expired.id] is InvitationStatus.EXPIRED
    assert statuses[again.id] is InvitationStatus.PENDING


@pytest.mark.parametrize("seen_first", [True, False])
async def test_accepting_an_invitation_gives_its_role_whatever_came_first(app_pool, seen_first):
    created = await invite(app_pool, "org_a", "Carol@X.io", role=ADMIN_ROLE)
    identity = Identity(user_id="user_c", org_id="org_a", role=MEMBER_ROLE, email="carol@x.IO")
    async with org_connection(app_pool, "org_a") as db:
        members = PgMemberDirectory(db)
        if seen_first:
            await members.record_seen(identity, T0)
        accepted = await members.accept_invitation(identity, now())
        assert await members.accept_invitation(identity, now()) is None
        await db.commit()
    assert accepted is not None and accepted.id == created.id
    assert accepted.status is InvitationStatus.ACCEPTED
    async with org_connection(app_pool, "org_a") as db:
        member = await PgIdentityDirectory(db).get_member("org_a", "user_c")
        (row,) = await db.fetch(
            "SELECT status, accepted_user_id, accepted_at IS NOT NULL FROM invitations"
        )
        listed = await PgIdentityDirectory(db).list_invitations("org_a")
    assert member is not None and (member.role, member.email) == (ADMIN_ROLE, "carol@x.IO")
    assert tuple(row) == ("accepted", "user_c", True)
    assert listed[0].status is InvitationStatus.ACCEPTED


async def test_an_invitation_is_not_accepted_expired_revoked_elsewhere_or_without_email(
    app_pool,
):
    await invite(app_pool, "org_a", "late@x.io", days=-1)
    revoked = await invite(app_pool, "org_a", "revoked@x.io")
    await invite(app_pool, "org_b", "other@x.io")
    async with org_connection(app_pool, "org_a") as db:
        await PgIdentityDirectory(db).revoke_invitation("org_a", revoked.id)
        await db.commit()
    cases = [
        Identity(user_id="user_1", org_id="org_a", email="late@x.io"),
        Identity(user_id="user_2", org_id="org_a", email="revoked@x.io"),
        Identity(user_id="user_3", org_id="org_a", email="other@x.io"),
        Identity(user_id="user_4", org_id="org_a"),
        Identity(user_id="user_5", org_id=None, email="other@x.io"),
    ]
    async with org_connection(app_pool, "org_a") as db:
        members = PgMemberDirectory(db)
        assert [await members.accept_invitation(i, now()) for i in cases] == [None] * 5
        await db.commit()
        assert await PgIdentityDirectory(db).list_members("org_a") == []


async def test_the_audit_log_pages_newest_first_per_organization(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        log = PgAuditLog(db)
        for n in range(5):
            await log.record(
                NewAuditEntry(
                    org_id="org_a", actor_user_id="user_admin" if n else None,
                    action=MEMBER_REMOVED, target_type="user", target_id=f"user_{n}",
                    details={"n": n},
                )
            )  # fmt: skip
        await db.commit()
    async with org_connection(app_pool, "org_b") as db:
        assert await PgAuditLog(db).page("org_a", limit=10, before_id=None) == []
    async with org_connection(app_pool, "org_a") as db:
        log = PgAuditLog(db)
        first = await log.page("org_a", limit=2, before_id=None)
        second = await log.page("org_a", limit=2, before_id=first[-1].id)
        rest = await log.page("org_a", limit=2, before_id=second[-1].id)
    assert [e.target_id for e in first + second + rest] == [f"user_{n}" for n in (4, 3, 2, 1, 0)]
    assert rest[-1].actor_user_id is None and rest[-1].details == {"n": 0}
    assert first[0].action == MEMBER_REMOVED and first[0].target_type == "user"
    assert first[0].at == rest[-1].at  # the transaction's time


async def test_a_removal_only_moves_forward(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        removals = PgMembershipRemovals(db)
        assert await removals.removed_at("org_a", "user_1") is None
        await removals.record("org_a", "user_1", T0 + timedelta(hours=1))
        await removals.record("org_a", "user_1", T0)
        assert await removals.removed_at("org_a", "user_1") == T0 + timedelta(hours=1)
        await removals.record("org_a", "user_1", T0 + timedelta(hours=2))
        await db.commit()
        assert await removals.removed_at("org_a", "user_1") == T0 + timedelta(hours=2)
    async with org_connection(app_pool, "org_b") as db:
        assert await PgMembershipRemovals(db).removed_at("org_a", "user_1") is None


async def test_a_webhook_message_is_new_once_across_organizations(app_pool):
    async with org_connection(app_pool, None) as db:
        receipts = PgWebhookReceipts(db)
        assert await receipts.first_time("msg_1", T0) is True
        assert await receipts.first_time("msg_1", T0) is False
        await db.commit()
        assert await receipts.first_time("msg_2", T0) is True
        await db.rollback()
    async with org_connection(app_pool, "org_a") as db:
        receipts = PgWebhookReceipts(db)
        assert await receipts.first_time("msg_1", T0) is False
        assert await receipts.first_time("msg_2", T0) is True
        await db.commit()


async def test_the_reaper_prunes_receipts_older_than_the_providers_retries(app_pool):
    now = datetime.now(UTC)
    async with org_connection(app_pool, None) as db:
        receipts = PgWebhookReceipts(db)
        assert await receipts.first_time("msg_old", now - timedelta(days=8))
        assert await receipts.first_time("msg_recent", now - timedelta(days=2))
        await db.commit()
    async with app_pool.acquire() as connection:
        assert await prune_webhook_receipts(connection, timedelta(days=7)) == 1
    async with org_connection(app_pool, None) as db:
        receipts = PgWebhookReceipts(db)
        assert await receipts.first_time("msg_recent", now) is False
        assert await receipts.first_time("msg_old", now) is True


async def test_concurrent_deliveries_of_one_message_are_new_once(app_pool):
    async def deliver() -> bool:
        async with org_connection(app_pool, None) as db:
            first = await PgWebhookReceipts(db).first_time("msg_x", T0)
            await asyncio.sleep(0.05)
            await db.commit()
        return first

    assert sorted(await asyncio.gather(deliver(), deliver())) == [False, True]


async def test_the_new_tables_refuse_rows_of_another_organization(app_pool, owner_engine):
    statements = [
        "INSERT INTO membership_removals VALUES ('org_b', 'user_1', now())",
        "INSERT INTO invitations (id, org_id, email, role, status, inviter_user_id, expires_at) "
        "VALUES ('inv_1', 'org_b', 'e@x.io', 'org:member', 'pending', 'u', now())",
        "INSERT INTO audit_log (org_id, action, target_type, target_id) "
        "VALUES ('org_b', 'a', 't', 'i')",
    ]
    for statement in statements:
        async with org_connection(app_pool, "org_a") as db:
            with pytest.raises(asyncpg.PostgresError, match="row-level security"):
                await db.execute(statement)
    async with owner_engine.begin() as connection:
        for statement in statements:
            await connection.execute(text(statement))
    async with org_connection(app_pool, "org_a") as db:
        for table in ("membership_removals", "invitations", "audit_log"):
            assert await db.fetch(f"SELECT * FROM {table}") == [], table


async def role_of(app_pool, org: str, user: str) -> str | None:
    async with org_connection(app_pool, org) as db:
        member = await PgIdentityDirectory(db).get_member(org, user)
    return member.role if member else None


async def test_a_tokens_claim_sets_the_role_only_when_the_claim_changes(app_pool):
    await invite(app_pool, "org_a", "eve@x.io", role=ADMIN_ROLE)
    eve = Identity(user_id="user_eve", org_id="org_a", role=MEMBER_ROLE, email="eve@x.io")
    async with org_connection(app_pool, "org_a") as db:
        members = PgMemberDirectory(db)
        await members.record_seen(eve, T0)
        await members.accept_invitation(eve, now())
        await db.commit()
    await seen(app_pool, "org_a", "user_eve", MEMBER_ROLE)  # the same claim: the invitation's
    assert await role_of(app_pool, "org_a", "user_eve") == ADMIN_ROLE
    await seen(app_pool, "org_a", "user_eve", ADMIN_ROLE)
    await seen(app_pool, "org_a", "user_eve", MEMBER_ROLE)  # the provider changed the role
    assert await role_of(app_pool, "org_a", "user_eve") == MEMBER_ROLE


async def test_a_membership_event_sets_the_role_until_the_claim_changes(app_pool):
    await seen(app_pool, "org_a", "user_ann", MEMBER_ROLE, email="ann@x.io", first_name="Ann")
    event = MembershipSet(
        org_id="org_a", user_id="user_ann", role=ADMIN_ROLE, profile=Profile(last_name="Lee")
    )
    async with org_connection(app_pool, "org_a") as db:
        before = await PgMemberDirectory(db).set_membership(event, T0)
        again = await PgMemberDirectory(db).set_membership(event, T0)
        made = await PgMemberDirectory(db).set_membership(
            MembershipSet(org_id="org_a", user_id="user_new", role=MEMBER_ROLE), T0
        )
        await db.commit()
        ann = await PgIdentityDirectory(db).get_member("org_a", "user_ann")
    assert before is not None and before.role == MEMBER_ROLE
    assert again is not None and again.role == ADMIN_ROLE and made is None
    assert ann is not None and (ann.email, ann.first_name, ann.last_name, ann.role) == (
        "ann@x.io", "Ann", "Lee", ADMIN_ROLE,
    )  # fmt: skip
    for claim in (MEMBER_ROLE, MEMBER_ROLE):  # remembered anew, then the same: no change
        await seen(app_pool, "org_a", "user_ann", claim)
    assert await role_of(app_pool, "org_a", "user_ann") == ADMIN_ROLE
    await seen(app_pool, "org_a", "user_new", ADMIN_ROLE)  # a first claim after the event
    assert await role_of(app_pool, "org_a", "user_new") == MEMBER_ROLE
    # A new organization is made with the membership.
    async with org_connection(app_pool, "org_new") as db:
        await PgMemberDirectory(db).set_membership(
            MembershipSet(org_id="org_new", user_id="user_x", role=MEMBER_ROLE), T0
        )
        await db.commit()
    assert await role_of(app_pool, "org_new", "user_x") == MEMBER_ROLE


async def test_a_users_events_reach_their_memberships_in_every_organization_alone(app_pool):
    for org in ("org_a", "org_b"):
        await seen(app_pool, org, "user_ann", email="old@x.io", first_name="A")
    await seen(app_pool, "org_a", "user_bob", email="bob@x.io")
    profile = Profile(email="ann@x.io", first_name="Ann", last_name=None)
    async with org_connection(app_pool, None) as db:
        users = PgUserMemberships(db)
        assert await users.update_profile("user_ann", profile) == ["org_a", "org_b"]
        assert await users.update_profile("user_ann", profile) == []  # nothing changes
        await db.commit()
    for org in ("org_a", "org_b"):
        async with org_connection(app_pool, org) as db:
            ann = await PgIdentityDirectory(db).get_member(org, "user_ann")
        assert ann is not None and (ann.email, ann.first_name) == ("ann@x.io", "Ann")
    async with org_connection(app_pool, None) as db:
        users = PgUserMemberships(db)
        assert await users.remove_everywhere("user_ann", T0) == ["org_a", "org_b"]
        assert await users.remove_everywhere("user_nobody", T0) == []
        # Without the functions, the app role still sees and writes no organization's rows.
        assert await db.fetch("SELECT * FROM memberships") == []
        with pytest.raises(asyncpg.PostgresError, match="row-level security"):
            await db.execute("INSERT INTO membership_removals VALUES ('org_a', 'user_z', now())")
    async with org_connection(app_pool, None) as db:
        await PgUserMemberships(db).remove_everywhere("user_ann", T0)
        await db.commit()
    for org in ("org_a", "org_b"):
        async with org_connection(app_pool, org) as db:
            assert await PgIdentityDirectory(db).get_member(org, "user_ann") is None
            assert await PgMembershipRemovals(db).removed_at(org, "user_ann") == T0
            (entry,) = await PgAuditLog(db).page(org, limit=5, before_id=None)
        assert (entry.action, entry.target_id, entry.actor_user_id) == (
            MEMBER_REMOVED_BY_PROVIDER, "user_ann", None,
        )  # fmt: skip
    assert await role_of(app_pool, "org_a", "user_bob") == MEMBER_ROLE


async def test_only_the_owner_passes_the_tables_the_functions_write(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        rows = await db.fetch(
            "SELECT p.tablename, p.roles::text[], pg_get_userbyid(c.relowner) FROM pg_policies p "
            "JOIN pg_class c ON c.relname = p.tablename AND c.relkind = 'r' "
            "WHERE p.policyname = 'owner_access' AND p.tablename = ANY($1::text[])",
            ["memberships", "membership_removals", "audit_log"],
        )
        functions = await db.fetch(
            "SELECT proname, prosecdef, pg_get_userbyid(proowner), "
            "has_function_privilege('public', oid, 'EXECUTE') FROM pg_proc "
            "WHERE proname IN ('ap_update_member_profile', 'ap_remove_member_everywhere')"
        )
    assert sorted(r[0] for r in rows) == ["audit_log", "membership_removals", "memberships"]
    assert all(r[1] == [r[2]] for r in rows)
    assert len(functions) == 2
    assert all(definer and not public for _, definer, _, public in functions)
    assert {r[2] for r in functions} == {r[2] for r in rows}
