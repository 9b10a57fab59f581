"""`POST /webhooks/identity`: Svix-signed identity-provider events; a membership deleted at
the provider ends the member's access at once, and a redelivery changes nothing."""

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
    raw, headers = signed({"type": "user.updated", "data": {"id": "user_ann"}}, "msg_2")
    response = await hooked.post("/webhooks/identity", content=raw, headers=headers)
    assert response.json() == {"success": True, "duplicate": False}
    raw, headers = signed({"type": "organizationMembership.deleted", "data": {}}, "msg_3")
    broken = await hooked.post("/webhooks/identity", content=raw, headers=headers)
    assert (broken.status_code, broken.json()) == (400, {"error": "Invalid webhook event"})
