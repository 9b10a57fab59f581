"""Authorization comes before validation (CONTRACT.md, "Conventions for every endpoint"): on
every route of the app, a caller who may not use it at all (no token, no organization, removed
from it, short of the route's role) gets 401/403 with the contract's body whatever the request
holds: a path, a query and a body that would each be refused."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from domain.agents import CANNOT_MANAGE_AGENTS
from domain.members import ADMIN_ONLY
from domain.org_settings import CONSOLE_ACCESS_REQUIRED
from entrypoints.http.middleware import PUBLIC_PATHS
from entrypoints.http.rules import ACCESS

UNAUTHORIZED = {"error": "Unauthorized"}
NO_ORGANIZATION = {"error": "User is not part of any organization"}
# Every query parameter a route of the app takes, each with a value its rule refuses.
BAD_QUERY = (
    "?kbId=x&fileId=x&agentId=x&tagId=x&taskId=x&skillId=x&threadId=x"
    "&limit=0&cursor=%00&part=x&page=0&path=&recipient="
)
# Bodies refused for what they hold, for their JSON and for their media type.
BAD_BODIES = (
    ("application/json", b"{}"),
    ("application/json", b'{"kbId": 2.0, "kbIds": ["2"], "name": ""'),
    ("text/plain", b"x"),
)
# The routes a member without a permission may not use, and what they are told.
ROLE_LIMITED = {
    **{
        (method, path): CANNOT_MANAGE_AGENTS
        for method, path in (
            ("POST", "/agents"),
            ("PATCH", "/agents"),
            ("DELETE", "/agents"),
            ("POST", "/agents/tags"),
            ("DELETE", "/agents/tags"),
            ("POST", "/scheduled-tasks"),
            ("PATCH", "/scheduled-tasks"),
            ("DELETE", "/scheduled-tasks"),
            ("POST", "/scheduled-tasks/run"),
            ("POST", "/tools"),
            ("PATCH", "/tools"),
            ("DELETE", "/tools"),
            ("POST", "/tools/refresh"),
        )
    },
    **{
        (method, path): ADMIN_ONLY
        for method, path in (
            ("GET", "/admin/getUsersInOrg"),
            ("POST", "/admin/updateUserMetadata"),
            ("POST", "/admin/bulkRemove"),
            ("DELETE", "/admin/users"),
            ("POST", "/admin/invitations"),
            ("GET", "/admin/invitations"),
            ("GET", "/admin/audit-log"),
            ("PUT", "/orgSettings"),
        )
    },
    ("GET", "/orgSettings"): CONSOLE_ACCESS_REQUIRED,
}
_PUBLIC = re.compile("|".join(PUBLIC_PATHS))


def protected_routes(client: Any) -> list[tuple[str, str]]:
    """(method, path template) of every route the bearer token guards, from the app's table."""
    routes = set()
    for route in client.ap_app.app.routes:
        for handler in getattr(route, "route_handlers", ()):
            for method in handler.http_methods - {"OPTIONS", "HEAD"}:
                if not _PUBLIC.search(route.path):
                    routes.add((method, route.path))
    return sorted(routes)


def bad_path(template: str) -> str:
    """The route's path with every path parameter one its rule refuses."""
    return re.sub(r"{\w+:\w+}", "not-a-uuid", template) + BAD_QUERY


async def answers(client: Any, headers: dict[str, str], method: str, path: str) -> list[Any]:
    return [
        await client.request(
            method,
            bad_path(path),
            content=content,
            headers={**headers, "Content-Type": media_type},
        )
        for media_type, content in BAD_BODIES
    ]


def test_the_table_covers_the_app(client):
    routes = protected_routes(client)
    assert ("POST", "/kb/search") in routes and ("POST", "/chat") in routes
    assert len(routes) > 40
    declared = {
        (method, route.path)
        for route in client.ap_app.app.routes
        for handler in getattr(route, "route_handlers", ())
        if handler.opt.get(ACCESS) is not None
        for method in handler.http_methods - {"OPTIONS", "HEAD"}
    }
    assert declared == set(ROLE_LIMITED)


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer not-a-jwt"}, {"Authorization": "Basic dXNlcjpwYXNz"}],
    ids=["no token", "malformed token", "another scheme"],
)
async def test_without_a_valid_token_every_route_is_401(client, headers):
    for method, path in protected_routes(client):
        for response in await answers(client, headers, method, path):
            assert (response.status_code, response.json()) == (401, UNAUTHORIZED), (method, path)


async def test_a_token_without_an_organization_is_403_on_every_route(client, member):
    nobody = member(None, "user_loner")
    for method, path in protected_routes(client):
        for response in await answers(client, nobody.headers, method, path):
            assert (response.status_code, response.json()) == (403, NO_ORGANIZATION), (method, path)


async def test_a_removed_member_is_403_on_every_route_whatever_the_request_holds(
    client, alice, member
):
    ann = member("org_a", "user_ann", "admin")  # even an admin's token ends with the removal
    assert (await client.get("/kb/manage", headers=ann.headers)).status_code == 200
    removed = await client.request(
        "DELETE", "/admin/users", json={"userIds": ["user_ann"]}, headers=alice.headers
    )
    assert removed.status_code == 200, removed.text
    refused = await client.post("/kb/search", json={}, headers=ann.headers)  # the case
    assert (refused.status_code, refused.json()) == (403, NO_ORGANIZATION)
    for method, path in protected_routes(client):
        for response in await answers(client, ann.headers, method, path):
            assert (response.status_code, response.json()) == (403, NO_ORGANIZATION), (method, path)


async def test_a_member_short_of_a_routes_role_is_403_whatever_the_request_holds(client, member):
    plain = member("org_a", "user_plain", "member")
    for method, path in protected_routes(client):
        for response in await answers(client, plain.headers, method, path):
            if (method, path) in ROLE_LIMITED:
                expected = {"error": ROLE_LIMITED[method, path]}
                assert (response.status_code, response.json()) == (403, expected), (method, path)
            else:  # the route is the member's: the request is what is refused
                assert response.status_code != 403, (method, path, response.text)


async def test_a_permission_opens_the_routes_it_names(client, member):
    manager = member("org_a", "user_manager", "member", permissions=["org:agents:manage"])
    console = member("org_a", "user_console", "member", permissions=["org:console:access"])
    created = await client.post("/agents", json={"name": "Helper"}, headers=manager.headers)
    assert created.status_code == 201, created.text
    refused = await client.post("/agents", json={}, headers=manager.headers)
    assert (refused.status_code, refused.json()["error"]) == (400, "Name is required")
    assert (await client.get("/orgSettings", headers=console.headers)).status_code == 200
    replaced = await client.put("/orgSettings", json={"settings": {}}, headers=console.headers)
    assert (replaced.status_code, replaced.json()) == (403, {"error": ADMIN_ONLY})


async def test_an_answers_stream_checks_its_caller_in_a_short_scope(client, member):
    """The chat routes hold no connection for the stream's length: the edge checks their caller
    in a scope of its own, and a valid request still reaches the use case."""
    thread = uuid.uuid4()
    plain = member("org_a", "user_plain", "member")
    response = await client.get(f"/chat/{thread}/stream", headers=plain.headers)
    assert response.status_code == 404, response.text
