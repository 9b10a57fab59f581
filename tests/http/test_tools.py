"""`/tools` over HTTP with the fake connector: create, list, read, change, refresh and delete
tool servers; each bad field's 400, who may manage, organization isolation, and header values
that never come back (nor reach the log)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from domain.tool_servers import ADDRESS_NOT_ALLOWED, TOOL_SERVER_NAME_TAKEN
from entrypoints.http.app import create_app
from tests.fakes.tool_servers import FakeToolConnector, tool
from tests.http.conftest import forget_members
from tests.http.tool_support import ToolConnectorOverride

URL = "http://127.0.0.1:9/mcp"
SECRET = "Bearer tok-9f8e7d6c5b4a"
FIELDS = {
    "id", "name", "kind", "url", "description", "headerNames", "requireApproval", "enabled",
    "status", "error", "tools", "refreshedAt", "createdAt", "updatedAt", "userId",
}  # fmt: skip


@pytest.fixture(scope="module")
def connector() -> FakeToolConnector:
    return FakeToolConnector()


@pytest.fixture(scope="module")
async def tools_session(settings, database, connector) -> AsyncIterator[AsyncTestClient]:
    app = create_app(settings, database, ToolConnectorOverride(connector))
    async with AsyncTestClient(app=app) as client:
        client.ap_app = app  # type: ignore[attr-defined]
        yield client


@pytest.fixture
async def client(tools_session, clean, connector) -> AsyncTestClient:
    await forget_members(tools_session)
    connector.__init__()  # type: ignore[misc]
    connector.tools[URL] = [tool("search", query={"type": "string"}), tool("fetch")]
    return tools_session


async def create(client, who, status: int = 201, **body):
    payload = {"name": "docs", "kind": "mcp", "url": URL, **body}
    response = await client.post("/tools", json=payload, headers=who.headers)
    assert response.status_code == status, response.text
    return response.json()


async def test_the_lifecycle_of_a_tool_server(client, alice, member, connector, caplog):
    caplog.set_level(logging.DEBUG)
    created = await create(
        client, alice, headers={"Authorization": SECRET}, requireApproval=["fetch"]
    )
    server = created["toolServer"]
    assert created["success"] is True and set(server) == FIELDS
    assert (server["status"], server["error"], server["headerNames"]) == (
        "ready", None, ["Authorization"],
    )  # fmt: skip
    assert server["tools"][0] == {
        "name": "search",
        "description": "The search tool",
        "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
    }
    assert server["requireApproval"] == ["fetch"] and server["userId"] == "user_alice"
    assert connector.discovered[-1].headers == {"Authorization": SECRET}

    reader = member("org_a", "user_reader")
    listed = await client.get("/tools", headers=reader.headers)
    assert listed.status_code == 200
    assert [s["id"] for s in listed.json()["toolServers"]] == [server["id"]]
    one = await client.get("/tools", params={"toolServerId": server["id"]}, headers=reader.headers)
    assert one.json()["toolServer"]["name"] == "docs"

    patched = await client.patch(
        "/tools",
        json={"toolServerId": server["id"], "enabled": False, "requireApproval": "always"},
        headers=alice.headers,
    )
    assert patched.status_code == 200, patched.text
    changed = patched.json()["toolServer"]
    assert (changed["enabled"], changed["requireApproval"]) == (False, "always")

    connector.tools[URL] = [tool("only")]
    refreshed = await client.post(
        "/tools/refresh", json={"toolServerId": server["id"]}, headers=alice.headers
    )
    assert refreshed.status_code == 200, refreshed.text
    assert [t["name"] for t in refreshed.json()["toolServer"]["tools"]] == ["only"]
    assert connector.discovered[-1].headers == {"Authorization": SECRET}

    deleted = await client.delete(
        "/tools", params={"toolServerId": server["id"]}, headers=alice.headers
    )
    assert deleted.json() == {"success": True, "message": "Tool server deleted"}
    gone = await client.get("/tools", params={"toolServerId": server["id"]}, headers=alice.headers)
    assert (gone.status_code, gone.json()) == (404, {"error": "Tool server not found"})

    everything = " ".join(
        [r.getMessage() for r in caplog.records]
        + [str(r.__dict__) for r in caplog.records]
        + [listed.text, one.text, patched.text, refreshed.text]
    )
    assert "tok-9f8e7d6c5b4a" not in everything


async def test_header_values_are_stored_sealed(client, alice, owner_engine):
    await create(client, alice, headers={"X-Api-Key": SECRET})
    async with owner_engine.connect() as connection:
        row = (
            await connection.execute(text("SELECT header_names, sealed_headers FROM tool_servers"))
        ).one()
    assert row[0] == ["X-Api-Key"] and SECRET.encode() not in bytes(row[1])


async def test_headers_sent_on_a_change_replace_them_all(client, alice, connector):
    server = (await create(client, alice, headers={"A": "1", "B": "2"}))["toolServer"]
    response = await client.patch(
        "/tools", json={"toolServerId": server["id"], "headers": {"C": "3"}}, headers=alice.headers
    )
    assert response.json()["toolServer"]["headerNames"] == ["C"]
    assert connector.discovered[-1].headers == {"C": "3"}


async def test_an_address_not_allowed_is_refused_and_nothing_stored(client, alice, connector):
    connector.refused.add("10.0.0.1")
    body = await create(client, alice, 400, url="http://10.0.0.1/mcp")
    assert body["error"] == ADDRESS_NOT_ALLOWED
    listed = await client.get("/tools", headers=alice.headers)
    assert listed.json()["toolServers"] == []


async def test_an_unreachable_server_is_created_with_status_error(client, alice, connector):
    connector.failures[URL] = "Connection refused by 127.0.0.1:9"
    server = (await create(client, alice))["toolServer"]
    assert (server["status"], server["error"], server["tools"]) == (
        "error", "Connection refused by 127.0.0.1:9", [],
    )  # fmt: skip
    del connector.failures[URL]
    refreshed = await client.post(
        "/tools/refresh", json={"toolServerId": server["id"]}, headers=alice.headers
    )
    assert refreshed.json()["toolServer"]["status"] == "ready"


async def test_a_duplicate_name_is_409(client, alice):
    await create(client, alice)
    assert (await create(client, alice, 409)) == {"error": TOOL_SERVER_NAME_TAKEN}
    other = (await create(client, alice, name="other"))["toolServer"]
    clash = await client.patch(
        "/tools", json={"toolServerId": other["id"], "name": "docs"}, headers=alice.headers
    )
    assert (clash.status_code, clash.json()) == (409, {"error": TOOL_SERVER_NAME_TAKEN})


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": None}, "name"),
        ({"name": "Docs Server"}, "name"),
        ({"name": "a" * 65}, "name"),
        ({"name": 5}, "name"),
        ({"kind": "grpc"}, "kind"),
        ({"kind": None}, "kind"),
        ({"url": None}, "url"),
        ({"url": "ftp://127.0.0.1/x"}, "url"),
        ({"url": "http://user:pw@127.0.0.1/"}, "url"),
        ({"url": "http://127.0.0.1/" + "a" * 2048}, "url"),
        ({"url": 7}, "url"),
        ({"description": "x" * 1025}, "description"),
        ({"description": 1}, "description"),
        ({"headers": "Authorization: x"}, "headers"),
        ({"headers": {"A": 1}}, "headers"),
        ({"headers": {f"X-{i}": "v" for i in range(21)}}, "headers"),
        ({"headers": {"Bad Name": "v"}}, "headers"),
        ({"headers": {"A": "v\r\nInjected: 1"}}, "headers"),
        ({"requireApproval": "sometimes"}, "requireApproval"),
        ({"requireApproval": [""]}, "requireApproval"),
        ({"requireApproval": ["t"] * 501}, "requireApproval"),
        ({"enabled": "yes"}, "enabled"),
    ],
)
async def test_each_bad_field_is_a_400_naming_it(client, alice, body, field):
    answer = await create(client, alice, 400, **body)
    assert answer["error"] and answer["details"][0]["field"] == field, answer
    assert "Injected" not in str(answer)


async def test_bad_ids(client, alice):
    for params in ({"toolServerId": "abc"}, {"toolServerId": "0"}):
        response = await client.get("/tools", params=params, headers=alice.headers)
        assert response.json()["error"] == "Valid tool server ID is required"
        assert response.status_code == 400
    for method, path, body in (
        ("PATCH", "/tools", {"name": "x"}),
        ("POST", "/tools/refresh", {"toolServerId": "1"}),
    ):
        response = await client.request(method, path, json=body, headers=alice.headers)
        assert (response.status_code, response.json()["error"]) == (
            400, "Valid tool server ID is required",
        )  # fmt: skip
    missing = await client.delete("/tools", params={"toolServerId": 99}, headers=alice.headers)
    assert (missing.status_code, missing.json()) == (404, {"error": "Tool server not found"})


async def test_a_plain_member_may_read_but_not_manage(client, alice, member):
    server = (await create(client, alice))["toolServer"]
    plain = member("org_a", "user_plain")
    manager = member("org_a", "user_manager", permissions=["org:agents:manage"])
    assert (await client.get("/tools", headers=plain.headers)).status_code == 200
    for method, path, kwargs in (
        ("POST", "/tools", {"json": {"name": "x", "kind": "mcp", "url": URL}}),
        ("PATCH", "/tools", {"json": {"toolServerId": server["id"], "name": "x"}}),
        ("DELETE", "/tools", {"params": {"toolServerId": server["id"]}}),
        ("POST", "/tools/refresh", {"json": {"toolServerId": server["id"]}}),
    ):
        refused = await client.request(method, path, headers=plain.headers, **kwargs)
        assert refused.status_code == 403, (method, path, refused.text)
    created = await create(client, manager, name="by-manager")
    assert created["toolServer"]["userId"] == "user_manager"


async def test_another_organizations_servers_are_not_found(client, alice, bob, member):
    server = (await create(client, alice))["toolServer"]
    bob_admin = member("org_b", "user_bob_admin", "admin")
    assert (await client.get("/tools", headers=bob.headers)).json()["toolServers"] == []
    for method, path, kwargs in (
        ("GET", "/tools", {"params": {"toolServerId": server["id"]}}),
        ("PATCH", "/tools", {"json": {"toolServerId": server["id"], "name": "x"}}),
        ("DELETE", "/tools", {"params": {"toolServerId": server["id"]}}),
        ("POST", "/tools/refresh", {"json": {"toolServerId": server["id"]}}),
    ):
        response = await client.request(method, path, headers=bob_admin.headers, **kwargs)
        assert (response.status_code, response.json()) == (404, {"error": "Tool server not found"})
    # The same name is free in another organization.
    assert (await create(client, bob_admin))["toolServer"]["name"] == "docs"


async def test_deleting_a_server_takes_it_off_every_agent(client, alice, owner_engine):
    server = (await create(client, alice))["toolServer"]
    other = (await create(client, alice, name="other"))["toolServer"]
    agent = await client.post("/agents", json={"name": "Helper"}, headers=alice.headers)
    agent_id = agent.json()["agent"]["id"]
    grants = json.dumps(
        [
            {"toolServerId": server["id"], "names": None},
            {"toolServerId": other["id"], "names": ["fetch"]},
        ]
    )
    async with owner_engine.begin() as connection:
        await connection.execute(
            text("UPDATE agents SET tools = CAST(:g AS jsonb) WHERE id = :id"),
            {"g": grants, "id": agent_id},
        )
    await client.delete("/tools", params={"toolServerId": server["id"]}, headers=alice.headers)
    async with owner_engine.connect() as connection:
        left = (
            await connection.execute(
                text("SELECT tools FROM agents WHERE id = :id"), {"id": agent_id}
            )
        ).scalar_one()
    assert left == [{"toolServerId": other["id"], "names": ["fetch"]}]
