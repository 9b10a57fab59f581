"""The same `/admin/*` endpoints with `AP_IDENTITY_DIRECTORY=clerk`: swapped by configuration
only, acting on a local server that answers as Clerk's Backend API does."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator

import pytest
from litestar.testing import AsyncTestClient

from entrypoints.http.app import create_app
from tests.integration.clerk_server import SECRET_KEY, ClerkServer, running


@pytest.fixture
def clerk() -> Iterator[ClerkServer]:
    for server in running():
        server.add_member("org_a", "user_ann", metadata={"team": "ops", "old": {"x": 1}})
        server.add_member("org_a", "user_bob")
        yield server


@pytest.fixture
async def admin_client(settings, database, clean, clerk) -> AsyncIterator[AsyncTestClient]:
    clerk_settings = dataclasses.replace(
        settings,
        identity_directory="clerk",
        clerk_secret_key=SECRET_KEY,
        clerk_api_url=clerk.url,
    )
    async with AsyncTestClient(app=create_app(clerk_settings, database)) as client:
        yield client


async def test_the_admin_endpoints_act_on_clerk(admin_client, clerk, member):
    admin = member("org_a", "user_admin", "admin")
    listed = await admin_client.get("/admin/getUsersInOrg", headers=admin.headers)
    assert listed.status_code == 200, listed.text
    assert sorted(m["id"] for m in listed.json()) == ["user_ann", "user_bob"]
    updated = await admin_client.post(
        "/admin/updateUserMetadata",
        json={"userId": "user_ann", "metadata": {"team": "sales"}},
        headers=admin.headers,
    )
    assert updated.status_code == 200, updated.text
    assert clerk.metadata("org_a", "user_ann") == {"team": "sales"}  # replaced, not merged
    ann = member("org_a", "user_ann", "member")
    removed = await admin_client.post(
        "/admin/bulkRemove", json={"userIds": ["user_ann", "user_zed"]}, headers=admin.headers
    )
    assert removed.status_code == 207, removed.text
    assert [e["userId"] for e in removed.json()["errors"]] == ["user_zed"]
    assert clerk.metadata("org_a", "user_ann") is None
    refused = await admin_client.get("/kb/manage", headers=ann.headers)
    assert refused.status_code == 403


async def test_a_clerk_outage_is_each_members_failure(admin_client, clerk, member):
    admin = member("org_a", "user_admin", "admin")
    clerk.fail_next(100, 503)
    removed = await admin_client.post(
        "/admin/bulkRemove", json={"userIds": ["user_bob"]}, headers=admin.headers
    )
    assert removed.status_code == 207, removed.text
    (failure,) = removed.json()["errors"]
    assert failure["userId"] == "user_bob" and "Clerk" in failure["error"]
    assert SECRET_KEY not in removed.text
