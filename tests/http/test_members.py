"""`/admin/*` on the local directory: members and their metadata, removals that end access at
once, invitations, and the audit log."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from tests.http.conftest import forget_members

NOT_A_MEMBER = {"error": "User is not a member of this organization"}
NO_ORGANIZATION = {"error": "User is not part of any organization"}


@pytest.fixture
def admin(member):
    return member("org_a", "user_admin", "admin", email="admin@a.test")


async def join(client, member, user: str, org: str = "org_a", **claims):
    """A member of the organization: the local directory records them on their first call."""
    who = member(org, user, "member", **claims)
    response = await client.get("/kb/manage", headers=who.headers)
    assert response.status_code == 200, response.text
    return who


async def test_members_and_their_metadata(client, admin, member):
    await join(client, member, "user_ann", email="ann@a.test")
    await join(client, member, "user_ann", org="org_b")
    listed = await client.get("/admin/getUsersInOrg", headers=admin.headers)
    assert listed.status_code == 200
    ann = next(m for m in listed.json() if m["id"] == "user_ann")
    assert set(ann) == {
        "id", "email", "firstName", "lastName", "publicMetadata", "lastSignInAt", "role"
    }  # fmt: skip
    assert (ann["email"], ann["publicMetadata"], ann["role"]) == ("ann@a.test", {}, "org:member")
    body = {"userId": "user_ann", "metadata": {"team": "ops", "level": 3, "tags": ["a"]}}
    updated = await client.post("/admin/updateUserMetadata", json=body, headers=admin.headers)
    assert updated.status_code == 200, updated.text
    assert updated.json() == {
        "success": True,
        "user": {
            "id": "user_ann",
            "email": "ann@a.test",
            "firstName": None,
            "lastName": None,
            "publicMetadata": {"team": "ops", "level": 3, "tags": ["a"]},
        },
    }
    replaced = await client.post(
        "/admin/updateUserMetadata",
        json={"userId": "user_ann", "metadata": {"vnum": 7}},
        headers=admin.headers,
    )
    assert replaced.json()["user"]["publicMetadata"] == {"vnum": 7}  # replaced, not merged
    theirs = member("org_b", "user_boss", "admin")
    other_org = await client.get("/admin/getUsersInOrg", headers=theirs.headers)
    assert [m["publicMetadata"] for m in other_org.json() if m["id"] == "user_ann"] == [{}]


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"userId": "user_nobody", "metadata": {}}, 403, NOT_A_MEMBER["error"]),
        ({"userId": "ann", "metadata": {}}, 400, "userId must be a user identifier"),
        ({"userId": "user_ann", "metadata": [1]}, 400, "metadata must be a JSON object"),
        ({"userId": "user_ann", "metadata": "x"}, 400, "metadata must be a JSON object"),
        ({"userId": "user_ann", "metadata": {"a": "x" * 70_000}}, 400, None),
        ({"userId": "user_ann"}, 400, "metadata must be a JSON object"),
    ],
)
async def test_bad_metadata_updates(client, admin, member, body, status, error):
    await join(client, member, "user_ann")
    response = await client.post("/admin/updateUserMetadata", json=body, headers=admin.headers)
    assert response.status_code == status, response.text
    if error:
        assert response.json()["error"] == error


async def test_admin_endpoints_need_an_admin_and_the_right_method(client, member):
    plain = await join(client, member, "user_ann")
    for method, path in (
        ("GET", "/admin/getUsersInOrg"),
        ("POST", "/admin/updateUserMetadata"),
        ("POST", "/admin/bulkRemove"),
        ("GET", "/admin/invitations"),
        ("GET", "/admin/audit-log"),
    ):
        body = (
            {"userId": "user_ann", "metadata": {}} if "update" in path else {"userIds": ["user_x"]}
        )
        response = await client.request(
            method, path, json=body if method == "POST" else None, headers=plain.headers
        )
        assert response.status_code == 403, (path, response.text)
    for path in ("/admin/updateUserMetadata", "/admin/bulkRemove"):
        wrong = await client.get(path, headers=plain.headers)
        assert wrong.status_code == 405 and "POST" in wrong.headers["allow"]


@pytest.mark.parametrize(
    "user_ids",
    [
        [],
        [f"user_{n}" for n in range(51)],
        ["user_ok", "not-an-id"],
        ["user_ann", "user_ann"],
        ["user_ann", "user_admin"],
    ],
)
async def test_a_bad_bulk_removal_removes_nobody(client, admin, member, user_ids):
    await join(client, member, "user_ann")
    response = await client.post(
        "/admin/bulkRemove", json={"userIds": user_ids}, headers=admin.headers
    )
    assert response.status_code == 400, response.text
    if "user_admin" in user_ids:
        assert response.json()["error"] == "You cannot remove yourself"
    listed = await client.get("/admin/getUsersInOrg", headers=admin.headers)
    assert "user_ann" in [m["id"] for m in listed.json()]


async def test_bulk_removal_ends_access_at_once(client, admin, member, owner_engine):
    ann = await join(client, member, "user_ann")
    bob = await join(client, member, "user_bob")
    await client.post(
        "/admin/updateUserMetadata",
        json={"userId": "user_ann", "metadata": {"team": "ops"}},
        headers=admin.headers,
    )
    response = await client.post(
        "/admin/bulkRemove", json={"userIds": ["user_ann", "user_ghost"]}, headers=admin.headers
    )
    assert response.status_code == 207, response.text
    assert response.headers["deprecation"] == "true"
    assert response.headers["link"] == '</admin/users>; rel="successor-version"'
    assert response.json() == {
        "success": False,
        "total": 2,
        "successful": 1,
        "failed": 1,
        "results": [{"userId": "user_ann", "success": True}],
        "errors": [{"userId": "user_ghost", "success": False, "error": NOT_A_MEMBER["error"]}],
    }
    # Ann's token, still valid, no longer opens anything of the organization.
    stream = f"/chat/{uuid.uuid4()}/stream"  # following an answer is refused as well
    for path in ("/kb/manage", "/agents", "/skills/manage", "/conversations", stream):
        refused = await client.get(path, headers=ann.headers)
        assert (refused.status_code, refused.json()) == (403, NO_ORGANIZATION), path
    assert (await client.get("/kb/manage", headers=bob.headers)).status_code == 200
    all_gone = await client.post(
        "/admin/bulkRemove", json={"userIds": ["user_bob"]}, headers=admin.headers
    )
    assert all_gone.status_code == 200 and all_gone.json()["success"] is True
    assert "errors" not in all_gone.json()
    # A token issued after the removal (and the clocks' leeway) is the identity provider
    # adding Ann again: a fresh membership. The removal is moved 10 s back to show it.
    async with owner_engine.begin() as connection:
        await connection.execute(
            text("UPDATE membership_removals SET removed_at = removed_at - interval '10 s'")
        )
    await forget_members(client)  # this process provisioned Ann's old token moments ago
    again = member("org_a", "user_ann", "member")
    assert (await client.get("/kb/manage", headers=again.headers)).status_code == 200
    listed = await client.get("/admin/getUsersInOrg", headers=admin.headers)
    assert [m["publicMetadata"] for m in listed.json() if m["id"] == "user_ann"] == [{}]


async def test_delete_users_handles_users_and_invitations_apart(client, admin, member):
    await join(client, member, "user_ann")
    invited = await client.post(
        "/admin/invitations",
        json={"email": "new@a.test", "role": "org:member"},
        headers=admin.headers,
    )
    assert invited.status_code == 201, invited.text
    invitation = invited.json()["invitation"]
    assert (invitation["status"], invitation["inviterUserId"]) == ("pending", "user_admin")
    response = await client.request(
        "DELETE",
        "/admin/users",
        json={"userIds": ["user_ann"], "invitationIds": [invitation["id"], "inv_missing"]},
        headers=admin.headers,
    )
    assert response.status_code == 207, response.text
    body = response.json()
    assert body["success"] is False
    assert body["users"] == {
        "total": 1,
        "successful": 1,
        "failed": 0,
        "results": [{"id": "user_ann", "success": True}],
    }
    assert body["invitations"]["results"] == [{"id": invitation["id"], "success": True}]
    assert [e["id"] for e in body["invitations"]["errors"]] == ["inv_missing"]
    listed = await client.get("/admin/invitations", headers=admin.headers)
    assert [i["status"] for i in listed.json()["invitations"]] == ["revoked"]
    empty = await client.request("DELETE", "/admin/users", json={}, headers=admin.headers)
    assert empty.status_code == 400


async def test_invitations(client, admin, member):
    create = "/admin/invitations"
    made = await client.post(
        create,
        json={"email": "Eve@A.test", "role": "org:admin", "expiresInDays": 3},
        headers=admin.headers,
    )
    assert made.status_code == 201, made.text
    again = await client.post(
        create, json={"email": "eve@a.test", "role": "org:member"}, headers=admin.headers
    )
    assert again.status_code == 409
    for bad in (
        {"email": "not an address", "role": "org:member"},
        {"email": "x@y.z", "role": "owner"},
        {"email": "x@y.z", "role": "org:member", "expiresInDays": 31},
    ):
        refused = await client.post(create, json=bad, headers=admin.headers)
        assert refused.status_code == 400, bad
    # Eve's first call with a token carrying the invited address accepts the invitation.
    eve = member("org_a", "user_eve", "member", email="eve@a.test")
    assert (await client.get("/kb/manage", headers=eve.headers)).status_code == 200
    listed = await client.get(create, headers=admin.headers)
    assert [i["status"] for i in listed.json()["invitations"]] == ["accepted"]


async def test_the_audit_log_pages_every_administrative_change(client, admin, member):
    await join(client, member, "user_ann")
    for n in range(3):
        await client.post(
            "/admin/updateUserMetadata",
            json={"userId": "user_ann", "metadata": {"n": n}},
            headers=admin.headers,
        )
    await client.post("/admin/bulkRemove", json={"userIds": ["user_ann"]}, headers=admin.headers)
    first = await client.get("/admin/audit-log?limit=2", headers=admin.headers)
    assert first.status_code == 200, first.text
    page = first.json()
    assert [e["action"] for e in page["entries"]] == [
        "member.removed",
        "member.metadata_replaced",
    ]
    assert page["entries"][1]["details"] == {"keysBefore": ["n"], "keysAfter": ["n"]}
    assert page["entries"][0]["actorUserId"] == "user_admin"
    rest = await client.get(
        f"/admin/audit-log?limit=2&cursor={page['nextCursor']}", headers=admin.headers
    )
    assert [e["action"] for e in rest.json()["entries"]] == ["member.metadata_replaced"] * 2
    assert rest.json()["nextCursor"] is None
    bad = await client.get("/admin/audit-log?cursor=nope", headers=admin.headers)
    assert (bad.status_code, bad.json()["error"]) == (400, "cursor is not valid")


async def test_the_role_an_invitation_grants_sticks_until_the_provider_changes_it(
    client, admin, member
):
    made = await client.post(
        "/admin/invitations",
        json={"email": "eve@a.test", "role": "org:admin"},
        headers=admin.headers,
    )
    assert made.status_code == 201, made.text

    async def role_after_a_call(claim: str) -> str:
        await forget_members(client)  # each call provisions Eve again, as a new token does
        eve = member("org_a", "user_eve", claim, email="eve@a.test")
        assert (await client.get("/kb/manage", headers=eve.headers)).status_code == 200
        listed = await client.get("/admin/getUsersInOrg", headers=admin.headers)
        return next(m["role"] for m in listed.json() if m["id"] == "user_eve")

    # Her tokens claim what the identity provider says: member, again and again.
    assert await role_after_a_call("member") == "org:admin"
    assert await role_after_a_call("member") == "org:admin"
    # A claim that changes is the provider changing her role.
    assert await role_after_a_call("admin") == "org:admin"
    assert await role_after_a_call("member") == "org:member"
