"""The Clerk directory against a local server that answers as Clerk's Backend API does."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from adapters.identity.clerk_directory import ClerkDirectory
from adapters.openai_gateway.retry import RetryPolicy
from application.ports.identity_directory import DirectoryUnavailable, IdentityDirectory
from domain.errors import Conflict
from domain.members import InvitationStatus
from tests.integration.clerk_server import SECRET_KEY, ClerkServer, running

ORG = "org_2aBcD"
OTHER_ORG = "org_9zYxW"
FAST = RetryPolicy(max_attempts=3, backoff_base=0.01, backoff_max=0.05, max_retry_after=2.0)


@pytest.fixture
def server() -> Iterator[ClerkServer]:
    for server in running():
        server.add_organization(ORG)
        server.add_organization(OTHER_ORG)
        yield server


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


@pytest.fixture
def directory(server: ClerkServer, client: httpx.AsyncClient) -> ClerkDirectory:
    return ClerkDirectory(client, secret_key=SECRET_KEY, base_url=server.url, retry=FAST)


def test_it_is_an_identity_directory(directory: ClerkDirectory) -> None:
    port: IdentityDirectory = directory
    assert port is directory


async def test_lists_every_member_across_pages(directory, server):
    for n in range(250):
        server.add_member(ORG, f"user_{n:04d}", last_sign_in_at=1_700_000_000_000 + n)
    server.add_member(OTHER_ORG, "user_elsewhere")

    members = await directory.list_members(ORG)

    assert [m.id for m in members] == [f"user_{n:04d}" for n in range(250)]
    pages = [r for r in server.calls("GET") if r.path.endswith("/memberships")]
    assert [(r.query["limit"], r.query["offset"]) for r in pages] == [
        (["100"], ["0"]),
        (["100"], ["100"]),
        (["100"], ["200"]),
    ]
    assert all(r.path == f"/v1/organizations/{ORG}/memberships" for r in pages)
    users = [r for r in server.calls("GET") if r.path == "/v1/users"]
    assert [len(r.query["user_id"]) for r in users] == [100, 100, 50]
    assert members[7].email == "user_0007@example.com"
    assert members[7].last_sign_in_at == datetime.fromtimestamp(1_700_000_000.007, UTC)


async def test_maps_the_membership_object(directory, server):
    server.add_member(
        ORG,
        "user_admin",
        email="grace@example.com",
        first_name="Grace",
        last_name="Hopper",
        role="admin",
        metadata={"team": "compilers"},
        last_sign_in_at=1_732_000_000_000,
    )
    server.add_member(ORG, "user_new", role="org:admin", first_name=None, last_name=None)
    server.add_member(ORG, "user_basic", role="basic_member")

    members = {m.id: m for m in await directory.list_members(ORG)}

    grace = members["user_admin"]
    assert (grace.email, grace.first_name, grace.last_name) == (
        "grace@example.com",
        "Grace",
        "Hopper",
    )
    assert grace.role == "org:admin"
    assert grace.public_metadata == {"team": "compilers"}
    assert grace.last_sign_in_at == datetime(2024, 11, 19, 7, 6, 40, tzinfo=UTC)
    assert members["user_new"].role == "org:admin"
    assert members["user_new"].first_name is None
    assert members["user_basic"].role == "org:member"
    assert members["user_basic"].last_sign_in_at is None


async def test_get_member_is_scoped_to_the_organization(directory, server):
    server.add_member(ORG, "user_a1")
    server.add_member(OTHER_ORG, "user_b1")

    assert (await directory.get_member(ORG, "user_a1")).id == "user_a1"
    assert await directory.get_member(ORG, "user_b1") is None
    assert await directory.get_member(ORG, "user_nobody") is None


async def test_ids_are_url_encoded(directory, server):
    server.add_member(ORG, "user_a1")

    assert await directory.remove_member(ORG, "user_a1/metadata") is False
    assert await directory.replace_metadata("org_x/../" + ORG, "user_a1", {"x": 1}) is None
    assert await directory.get_member(ORG, "user_a1 ") is None
    assert await directory.remove_member("..", "user_a1") is False

    paths = [r.path for r in server.requests]
    assert f"/v1/organizations/{ORG}/memberships/user_a1%2Fmetadata" in paths
    assert "/v1/organizations/org_x%2F%2E%2E%2F" + ORG + "/memberships" in paths
    assert "/v1/organizations/%2E%2E/memberships/user_a1" in paths
    assert server.metadata(ORG, "user_a1") == {}


async def test_replacing_metadata_leaves_exactly_the_new_object(directory, server):
    old = {
        "a": 1,
        "b": {"c": 1, "d": {"e": 1, "f": 2}},
        "g": [1, 2, 3],
        "h": {"i": 1},
        "keep": {"same": True},
        "n": 1,
    }
    new = {
        "b": {"d": {"f": 3}},
        "g": [4, {"x": None}],
        "h": "now a string",
        "j": {"k": None, "l": [None]},
        "keep": {"same": True},
        "n": True,
        "empty": {},
    }
    server.add_member(ORG, "user_m1", metadata=old)

    member = await directory.replace_metadata(ORG, "user_m1", new)

    expected = {
        "b": {"d": {"f": 3}},
        "g": [4, {"x": None}],
        "h": "now a string",
        "j": {"l": [None]},
        "keep": {"same": True},
        "n": True,
        "empty": {},
    }
    assert server.metadata(ORG, "user_m1") == expected
    assert member is not None
    assert member.public_metadata == expected
    assert member.id == "user_m1"
    (patch,) = server.calls("PATCH")
    assert patch.path == f"/v1/organizations/{ORG}/memberships/user_m1/metadata"
    assert patch.body == {
        "public_metadata": {
            "a": None,
            "b": {"c": None, "d": {"e": None, "f": 3}},
            "g": [4, {"x": None}],
            "h": "now a string",
            "j": {"l": [None]},
            "n": True,
            "empty": {},
        }
    }


async def test_replacing_with_an_empty_object_clears_it(directory, server):
    server.add_member(ORG, "user_m1", metadata={"a": {"b": 1}, "c": [1]})

    member = await directory.replace_metadata(ORG, "user_m1", {})

    assert member is not None and member.public_metadata == {}
    assert server.metadata(ORG, "user_m1") == {}


async def test_replacing_metadata_of_a_non_member_is_none(directory, server):
    server.add_member(OTHER_ORG, "user_m1", metadata={"a": 1})

    assert await directory.replace_metadata(ORG, "user_m1", {"b": 2}) is None
    assert server.calls("PATCH") == []
    assert server.metadata(OTHER_ORG, "user_m1") == {"a": 1}


async def test_an_organization_clerk_does_not_know_has_no_members(directory, server):
    unknown = "org_unknown"

    assert await directory.list_members(unknown) == []
    assert await directory.get_member(unknown, "user_a1") is None
    assert await directory.replace_metadata(unknown, "user_a1", {}) is None
    assert await directory.remove_member(unknown, "user_a1") is False
    assert await directory.list_invitations(unknown) == []
    assert await directory.revoke_invitation(unknown, "orginv_abc") is False
    with pytest.raises(DirectoryUnavailable) as raised:
        await directory.create_invitation(
            unknown,
            email="x@example.com",
            role="org:member",
            inviter_user_id="user_a1",
            expires_at=datetime.now(UTC) + timedelta(days=7),
        )
    assert raised.value.message == "Clerk refused the request (HTTP 404: resource_not_found)"


async def test_removal_deletes_the_membership_once(directory, server):
    server.add_member(ORG, "user_r1", metadata={"a": 1})
    server.add_member(OTHER_ORG, "user_r1", metadata={"b": 2})

    assert await directory.remove_member(ORG, "user_r1") is True
    assert await directory.remove_member(ORG, "user_r1") is False
    assert await directory.get_member(ORG, "user_r1") is None
    assert server.metadata(OTHER_ORG, "user_r1") == {"b": 2}


async def test_a_429_waits_for_its_retry_after(directory, server):
    server.add_member(ORG, "user_a1")
    server.fail_next(1, 429, retry_after="0.3")

    started = time.monotonic()
    member = await directory.get_member(ORG, "user_a1")
    waited = time.monotonic() - started

    assert member is not None
    assert 0.28 <= waited < 1.5
    assert len([r for r in server.requests if r.path.endswith("/memberships")]) == 2


async def test_a_429_pauses_the_other_calls_too(directory, server):
    for n in range(4):
        server.add_member(ORG, f"user_p{n}")
    server.fail_next(1, 429, retry_after="0.3", method="DELETE")
    server.latency = 0.05

    first = asyncio.create_task(directory.remove_member(ORG, "user_p0"))
    await asyncio.sleep(0.15)  # the 429 has come back: the others wait behind it
    rest = await asyncio.gather(*(directory.remove_member(ORG, f"user_p{n}") for n in (1, 2, 3)))

    assert await first is True and rest == [True, True, True]
    limited, *later = server.calls("DELETE")
    assert len(later) == 4
    assert all(call.at - limited.at >= 0.28 for call in later)


async def test_server_errors_are_retried(directory, server):
    server.add_member(ORG, "user_a1")
    server.fail_next(1, 500)
    server.fail_next(1, 503)

    assert (await directory.get_member(ORG, "user_a1")).id == "user_a1"


async def test_persistent_server_errors_end_in_directory_unavailable(directory, server):
    server.add_member(ORG, "user_a1")
    server.fail_next(3, 503)

    with pytest.raises(DirectoryUnavailable) as raised:
        await directory.remove_member(ORG, "user_a1")

    assert raised.value.message == (
        "Clerk is unavailable (HTTP 503: internal_clerk_error; gave up after 3 attempts)"
    )
    assert len(server.calls("DELETE")) == 3
    assert server.metadata(ORG, "user_a1") == {}


async def test_a_removal_carried_out_before_a_5xx_counts_as_done(directory, server):
    server.add_member(ORG, "user_a1")
    server.fail_next(1, 502, method="DELETE", after_work=True)

    assert await directory.remove_member(ORG, "user_a1") is True
    assert server.memberships[ORG] == {}
    assert len(server.calls("DELETE")) == 2


async def test_an_invitation_created_before_a_5xx_is_not_a_conflict(directory, server):
    server.fail_next(1, 500, method="POST", after_work=True)

    invitation = await directory.create_invitation(
        ORG,
        email="retry@example.com",
        role="org:member",
        inviter_user_id="user_admin",
        expires_at=datetime.now(UTC) + timedelta(days=3),
    )

    assert list(server.invitations[ORG]) == [invitation.id]
    assert invitation.status is InvitationStatus.PENDING


async def test_a_revocation_carried_out_before_a_5xx_counts_as_done(directory, server):
    invitation = await directory.create_invitation(
        ORG,
        email="gone@example.com",
        role="org:member",
        inviter_user_id="user_admin",
        expires_at=datetime.now(UTC) + timedelta(days=3),
    )
    server.fail_next(1, 500, method="POST", after_work=True)

    assert await directory.revoke_invitation(ORG, invitation.id) is True
    assert server.invitations[ORG][invitation.id]["status"] == "revoked"


async def test_a_silent_server_times_out_into_directory_unavailable(server, client):
    server.add_member(ORG, "user_a1")
    server.latency = 0.3
    directory = ClerkDirectory(
        client, secret_key=SECRET_KEY, base_url=server.url, retry=FAST, timeout=0.1
    )

    with pytest.raises(DirectoryUnavailable, match="timed out; gave up after 3 attempts"):
        await directory.list_members(ORG)


async def test_no_server_at_all_is_unavailable(client):
    directory = ClerkDirectory(
        client, secret_key=SECRET_KEY, base_url="http://127.0.0.1:9", retry=FAST
    )

    with pytest.raises(DirectoryUnavailable, match="connection error: ConnectError"):
        await directory.list_invitations(ORG)


async def test_the_secret_never_reaches_a_message(server, client):
    server.add_member(ORG, "user_a1")
    wrong = "sk_test_" + "Wrong0Secret1Key2ThatIsLong3Enough4"
    directory = ClerkDirectory(client, secret_key=wrong, base_url=server.url, retry=FAST)

    with pytest.raises(DirectoryUnavailable) as refused:
        await directory.list_members(ORG)
    assert refused.value.message == "Clerk refused the secret key (HTTP 401)"
    assert server.requests[0].authorization == f"Bearer {wrong}"

    right = ClerkDirectory(client, secret_key=SECRET_KEY, base_url=server.url, retry=FAST)
    server.fail_next(5, 500)
    with pytest.raises(DirectoryUnavailable) as failed:
        await right.get_member(ORG, "user_a1")

    for raised, key in ((refused.value, wrong), (failed.value, SECRET_KEY)):
        shown = f"{raised} {raised!r} {raised.message} {raised.__cause__} {raised.__context__}"
        assert key not in shown
        assert "errors" not in shown and "long_message" not in shown


async def test_invitations_are_created_listed_and_revoked(directory, server):
    server.add_member(ORG, "user_admin", role="org:admin")
    expires = datetime.now(UTC) + timedelta(days=7)

    first = await directory.create_invitation(
        ORG,
        email="new@example.com",
        role="org:admin",
        inviter_user_id="user_admin",
        expires_at=expires,
    )
    second = await directory.create_invitation(
        ORG,
        email="other@example.com",
        role="org:member",
        inviter_user_id="user_admin",
        expires_at=expires,
    )

    assert first.id.startswith("orginv_")
    assert (first.email, first.role, first.status, first.inviter_user_id) == (
        "new@example.com",
        "org:admin",
        InvitationStatus.PENDING,
        "user_admin",
    )
    assert abs(first.expires_at - expires) < timedelta(minutes=1)
    (post, _) = [r for r in server.calls("POST") if r.path.endswith("/invitations")]
    assert post.body == {
        "email_address": "new@example.com",
        "role": "org:admin",
        "inviter_user_id": "user_admin",
        "expires_in_days": 7,
    }
    with pytest.raises(Conflict):
        await directory.create_invitation(
            ORG,
            email="NEW@example.com",
            role="org:member",
            inviter_user_id="user_admin",
            expires_at=expires,
        )

    listed = await directory.list_invitations(ORG)
    assert [i.id for i in listed] == [second.id, first.id]
    assert await directory.list_invitations(OTHER_ORG) == []

    assert await directory.revoke_invitation(ORG, first.id) is True
    assert await directory.revoke_invitation(ORG, first.id) is False
    assert await directory.revoke_invitation(ORG, "orginv_unknown") is False
    assert await directory.revoke_invitation(OTHER_ORG, second.id) is False
    statuses = {i.id: i.status for i in await directory.list_invitations(ORG)}
    assert statuses == {first.id: InvitationStatus.REVOKED, second.id: InvitationStatus.PENDING}

    again = await directory.create_invitation(
        ORG,
        email="new@example.com",
        role="org:member",
        inviter_user_id="user_admin",
        expires_at=expires,
    )
    assert again.status is InvitationStatus.PENDING and again.id != first.id


async def test_a_pending_invitation_past_its_expiry_reads_expired(directory, server):
    invitation = await directory.create_invitation(
        ORG,
        email="late@example.com",
        role="org:member",
        inviter_user_id="user_admin",
        expires_at=datetime.now(UTC) + timedelta(days=1),
    )
    server.invitations[ORG][invitation.id]["expires_at"] = 1_000

    (listed,) = await directory.list_invitations(ORG)
    assert listed.status is InvitationStatus.EXPIRED


async def test_removals_in_parallel_respect_the_concurrency_bound(server, client):
    for n in range(50):
        server.add_member(ORG, f"user_c{n:02d}")
    server.latency = 0.03
    directory = ClerkDirectory(
        client, secret_key=SECRET_KEY, base_url=server.url, retry=FAST, max_concurrency=4
    )
    ids = [f"user_c{n:02d}" for n in range(50)] + ["user_gone"]

    results = await asyncio.gather(*(directory.remove_member(ORG, uid) for uid in ids))

    assert results == [True] * 50 + [False]
    assert server.memberships[ORG] == {}
    assert server.max_in_flight == 4
