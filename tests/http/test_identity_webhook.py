"""`POST /webhooks/identity`: Svix-signed identity-provider events; a membership deleted at
the provider ends the member's access at once, a membership made or changed sets the member's
role, a user changed or deleted at the provider is changed or removed in every organization,
an event that changes nothing writes nothing, and a redelivery changes nothing."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from entrypoints.http.app import create_app
from tests.http.conftest import forget_members

KEY = b"k" * 32
SECRET = "whsec_" + base64.b64encode(KEY).decode()


def signed(body: dict, message_id: str = "msg_1", at: int | None = None, key: bytes = KEY):
    raw = json.dumps(body).encode()
    at = int(time.time()) if at is None else at
    digest = hmac.new(key, f"{message_id}.{at}.".encode() + raw, hashlib.sha256).digest()
    headers = {
        "svix-id": message_id,
        "svix-timestamp": str(at),
        "svix-signature": "v1," + base64.b64encode(digest).decode(),
        "content-type": "application/json",
    }
    return raw, headers


def deleted(org: str = "org_a", user: str = "user_ann") -> dict:
    return {
        "type": "organizationMembership.deleted",
        "object": "event",
        "data": {
            "object": "organization_membership",
            "organization": {"id": org, "name": "A"},
            "public_user_data": {"user_id": user, "identifier": "ann@a.test"},
            "role": "org:member",
        },
    }


@pytest.fixture
async def hooked(settings, database, clean) -> AsyncIterator[AsyncTestClient]:
    app = create_app(dataclasses.replace(settings, identity_webhook_secret=SECRET), database)
    async with AsyncTestClient(app=app) as client:
        client.ap_app = app  # type: ignore[attr-defined]
        await forget_members(client)
        yield client


async def test_without_a_secret_the_route_is_404(client):
    raw, headers = signed(deleted())
    response = await client.post("/webhooks/identity", content=raw, headers=headers)
    assert response.status_code == 404


async def test_a_membership_deleted_at_the_provider_ends_access(hooked, member):
    admin = member("org_a", "user_admin", "admin")
    ann = member("org_a", "user_ann", "member")
    assert (await hooked.get("/kb/manage", headers=ann.headers)).status_code == 200
    raw, headers = signed(deleted())
    response = await hooked.post("/webhooks/identity", content=raw, headers=headers)
    assert response.json() == {"success": True, "duplicate": False}
    refused = await hooked.get("/kb/manage", headers=ann.headers)
    assert (refused.status_code, refused.json()) == (
        403,
        {"error": "User is not part of any organization"},
    )
    members = await hooked.get("/admin/getUsersInOrg", headers=admin.headers)
    assert "user_ann" not in [m["id"] for m in members.json()]
    again = await hooked.post("/webhooks/identity", content=raw, headers=headers)
    assert again.json() == {"success": True, "duplicate": True}
    log = await hooked.get("/admin/audit-log", headers=admin.headers)
    (entry,) = log.json()["entries"]
    assert (entry["action"], entry["targetId"], entry["actorUserId"]) == (
        "member.removed_by_identity_provider",
        "user_ann",
        None,
    )


@pytest.mark.parametrize(
    "change",
    ["body", "old", "key", "no-signature"],
)
async def test_a_message_that_is_not_the_providers_is_400(hooked, change):
    raw, headers = signed(
        deleted(),
        at=int(time.time()) - 600 if change == "old" else None,
        key=b"x" * 32 if change == "key" else KEY,
    )
    if change == "body":
        raw = raw.replace(b"user_ann", b"user_bob")
    if change == "no-signature":
        del headers["svix-signature"]
    response = await hooked.post("/webhooks/identity", content=raw, headers=headers)
    assert (response.status_code, response.json()) == (400, {"error": "Invalid webhook signature"})


async def test_other_events_are_acknowledged(hooked):
    raw, headers = signed({"type": "session.created", "data": {"id": "sess_1"}}, "msg_2")
    response = await hooked.post("/webhooks/identity", content=raw, headers=headers)
    assert response.json() == {"success": True, "duplicate": False}
    raw, headers = signed({"type": "organizationMembership.deleted", "data": {}}, "msg_3")
    broken = await hooked.post("/webhooks/identity", content=raw, headers=headers)
    assert (broken.status_code, broken.json()) == (400, {"error": "Invalid webhook event"})


def membership(kind: str, role: str, org: str = "org_a", user: str = "user_ann") -> dict:
    return {
        "type": f"organizationMembership.{kind}",
        "object": "event",
        "data": {
            "object": "organization_membership",
            "id": "orgmem_1",
            "role": role,
            "organization": {"id": org, "name": "A", "slug": "a"},
            "public_user_data": {
                "user_id": user,
                "identifier": "ann@a.test",
                "first_name": "Ann",
                "last_name": None,
                "image_url": "https://img.clerk.com/x",
                "has_image": False,
            },
            "created_at": 1767225600000,
            "updated_at": 1767225600000,
        },
    }


def user_updated(user: str = "user_ann", email: str = "ann@new.test") -> dict:
    return {
        "type": "user.updated",
        "object": "event",
        "data": {
            "object": "user",
            "id": user,
            "first_name": "Annie",
            "last_name": "Lee",
            "primary_email_address_id": "idn_2",
            "email_addresses": [
                {"id": "idn_1", "object": "email_address", "email_address": "old@a.test"},
                {"id": "idn_2", "object": "email_address", "email_address": email},
            ],
        },
    }


async def deliver(client, body: dict, message_id: str) -> dict:
    raw, headers = signed(body, message_id)
    response = await client.post("/webhooks/identity", content=raw, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


async def members_of(client, admin) -> dict[str, dict]:
    listed = await client.get("/admin/getUsersInOrg", headers=admin.headers)
    assert listed.status_code == 200, listed.text
    return {m["id"]: m for m in listed.json()}


async def audit_of(client, admin) -> list[tuple]:
    log = await client.get("/admin/audit-log", headers=admin.headers)
    return [(e["action"], e["targetId"], e["details"]) for e in log.json()["entries"]]


async def test_removing_someone_who_never_was_a_member_writes_nothing(hooked, member, owner_engine):
    admin = member("org_a", "user_admin", "admin")
    assert (await hooked.get("/kb/manage", headers=admin.headers)).status_code == 200
    ghost = member("org_a", "user_ghost", "member")
    assert await deliver(hooked, deleted(user="user_ghost"), "msg_ghost") == {
        "success": True,
        "duplicate": False,
    }
    assert await audit_of(hooked, admin) == []
    async with owner_engine.connect() as connection:
        removals = await connection.scalar(text("SELECT count(*) FROM membership_removals"))
    assert removals == 0
    # No removal was recorded, so the provider's token of the time still works.
    assert (await hooked.get("/kb/manage", headers=ghost.headers)).status_code == 200


async def test_a_membership_made_or_changed_at_the_provider_sets_the_role(hooked, member):
    admin = member("org_a", "user_admin", "admin")
    assert await deliver(hooked, membership("created", "org:member"), "msg_c") == {
        "success": True,
        "duplicate": False,
    }
    ann = (await members_of(hooked, admin))["user_ann"]
    assert (ann["role"], ann["email"], ann["firstName"], ann["lastSignInAt"]) == (
        "org:member", "ann@a.test", "Ann", None,
    )  # fmt: skip
    await deliver(hooked, membership("updated", "org:admin"), "msg_u")
    assert (await members_of(hooked, admin))["user_ann"]["role"] == "org:admin"
    # Ann's next call, with a token of the provider's that still claims what it claimed.
    ann_token = member("org_a", "user_ann", "member", email="ann@a.test")
    assert (await hooked.get("/kb/manage", headers=ann_token.headers)).status_code == 200
    assert (await members_of(hooked, admin))["user_ann"]["role"] == "org:admin"
    await deliver(hooked, membership("updated", "org:admin"), "msg_same")  # changes nothing
    assert await audit_of(hooked, admin) == [
        (
            "member.role_set_by_identity_provider",
            "user_ann",
            {"roleBefore": "org:member", "roleAfter": "org:admin"},
        ),
        (
            "member.role_set_by_identity_provider",
            "user_ann",
            {"roleBefore": None, "roleAfter": "org:member"},
        ),
    ]


async def test_a_user_changed_at_the_provider_changes_in_every_organization(hooked, member):
    admins = [member(org, f"user_{org}", "admin") for org in ("org_a", "org_b")]
    for org in ("org_a", "org_b"):
        ann = member(org, "user_ann", "member", email="ann@a.test")
        assert (await hooked.get("/kb/manage", headers=ann.headers)).status_code == 200
    await deliver(hooked, user_updated(), "msg_user")
    for admin in admins:
        ann = (await members_of(hooked, admin))["user_ann"]
        assert (ann["email"], ann["firstName"], ann["lastName"]) == ("ann@new.test", "Annie", "Lee")
        assert await audit_of(hooked, admin) == []


async def test_a_user_deleted_at_the_provider_leaves_every_organization(hooked, member):
    admins = [member(org, f"user_{org}", "admin") for org in ("org_a", "org_b")]
    anns = [member(org, "user_ann", "member") for org in ("org_a", "org_b")]
    bob = member("org_a", "user_bob", "member")
    for who in (*admins, *anns, bob):
        assert (await hooked.get("/kb/manage", headers=who.headers)).status_code == 200
    body = {"type": "user.deleted", "object": "event", "data": {"id": "user_ann", "deleted": True}}
    await deliver(hooked, body, "msg_gone")
    for ann, admin in zip(anns, admins, strict=True):
        refused = await hooked.get("/kb/manage", headers=ann.headers)
        assert (refused.status_code, refused.json()) == (
            403,
            {"error": "User is not part of any organization"},
        )
        assert "user_ann" not in await members_of(hooked, admin)
        assert await audit_of(hooked, admin) == [
            ("member.removed_by_identity_provider", "user_ann", {})
        ]
    assert (await hooked.get("/kb/manage", headers=bob.headers)).status_code == 200
    assert "user_bob" in await members_of(hooked, admins[0])


@pytest.mark.parametrize(
    "body",
    [
        {"type": "organizationMembership.created", "data": {"organization": {"id": "org_a"}}},
        membership("updated", ""),
        {"type": "user.updated", "data": {"id": "not a user"}},
        {"type": "user.deleted", "data": {"deleted": True}},
    ],
)
async def test_an_event_acted_on_without_its_ids_is_400(hooked, body):
    raw, headers = signed(body, "msg_bad")
    response = await hooked.post("/webhooks/identity", content=raw, headers=headers)
    assert (response.status_code, response.json()) == (400, {"error": "Invalid webhook event"})
