"""`/agents` and `/agents/tags` end to end against real Postgres."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from tests.http.helpers import make_kb

AGENT_FIELDS = {
    "id",
    "name",
    "description",
    "role",
    "model",
    "knowledgeBaseIds",
    "skillIds",
    "tags",
    "createdAt",
    "updatedAt",
    "userId",
    "knowledgeFilters",
    "tools",
}


async def make_agent(client, who, **body: Any) -> dict[str, Any]:
    response = await client.post("/agents", json={"name": "Helper", **body}, headers=who.headers)
    assert response.status_code == 201, response.text
    return response.json()["agent"]


async def make_tag(client, who, name: str = "support", **body: Any) -> dict[str, Any]:
    response = await client.post("/agents/tags", json={"name": name, **body}, headers=who.headers)
    assert response.status_code == 201, response.text
    return response.json()["tag"]


async def make_skill(client, who, name: str) -> int:
    skill_md = f"---\nname: {name}\ndescription: A skill.\n---\nDo it.\n"
    response = await client.post("/skills/manage", json={"skillMd": skill_md}, headers=who.headers)
    assert response.status_code == 201, response.text
    return int(response.json()["skill"]["id"])


@pytest.fixture
def manager(member):
    """A plain member whose token grants `org:agents:manage`."""
    return member("org_a", "user_manager", "member", permissions=["org:agents:manage"])


@pytest.fixture
def bob(member):
    """An admin of another organization (conftest's bob is a plain member)."""
    return member("org_b", "user_bob", "admin")


@pytest.fixture
def carol(member):
    """A plain member of alice's organization, without the permission."""
    return member("org_a", "user_carol", "member")


async def test_create_returns_201_with_the_contract_fields(client, alice):
    kb = await make_kb(client, alice)
    tag = await make_tag(client, alice, color="#12AB34")
    s1, s2 = await make_skill(client, alice, "one"), await make_skill(client, alice, "two")
    response = await client.post(
        "/agents",
        json={
            "name": "  Support bot ",
            "description": "Answers questions",
            "role": "You answer from the handbook.",
            "knowledgeBaseIds": [kb["id"]],
            "skillIds": [s2, s1],
            "tagIds": [tag["id"]],
        },
        headers=alice.headers,
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["success"] is True
    agent = body["agent"]
    assert set(agent) == AGENT_FIELDS
    assert (agent["name"], agent["description"], agent["role"]) == (
        "Support bot",
        "Answers questions",
        "You answer from the handbook.",
    )
    assert agent["model"] == "local:smollm2-135m" and agent["userId"] == "user_alice"
    assert agent["knowledgeBaseIds"] == [kb["id"]] and agent["skillIds"] == [s2, s1]
    assert agent["tags"] == [{"id": tag["id"], "name": "support", "color": "#12ab34"}]


async def test_get_one_and_list_with_tag_filter(client, alice, bob):
    tag = await make_tag(client, alice)
    first = await make_agent(client, alice, name="First", tagIds=[tag["id"]])
    second = await make_agent(client, alice, name="Second", model="openai:gpt-4o-mini")
    await make_agent(client, bob, name="Theirs")

    listed = await client.get("/agents", headers=alice.headers)
    assert listed.status_code == 200
    assert [a["name"] for a in listed.json()["agents"]] == ["Second", "First"]
    assert listed.json()["success"] is True

    tagged = await client.get(f"/agents?tagId={tag['id']}", headers=alice.headers)
    assert [a["id"] for a in tagged.json()["agents"]] == [first["id"]]

    one = await client.get(f"/agents?agentId={second['id']}", headers=alice.headers)
    assert one.status_code == 200
    assert one.json() == {"success": True, "agent": second}


async def test_a_plain_member_reads_but_cannot_manage(client, alice, carol):
    agent = await make_agent(client, alice)
    tag = await make_tag(client, alice)
    forbidden = {"error": "Agent management permission required"}
    attempts = [
        client.post("/agents", json={"name": "Mine"}, headers=carol.headers),
        client.patch("/agents", json={"agentId": agent["id"], "name": "X"}, headers=carol.headers),
        client.delete(f"/agents?agentId={agent['id']}", headers=carol.headers),
        client.post("/agents/tags", json={"name": "t"}, headers=carol.headers),
        client.delete(f"/agents/tags?tagId={tag['id']}", headers=carol.headers),
    ]
    for attempt in attempts:
        response = await attempt
        assert response.status_code == 403
        assert response.json() == forbidden
    listed = await client.get("/agents", headers=carol.headers)
    assert listed.status_code == 200 and [a["id"] for a in listed.json()["agents"]] == [agent["id"]]
    one = await client.get(f"/agents?agentId={agent['id']}", headers=carol.headers)
    assert one.status_code == 200 and one.json()["agent"]["name"] == "Helper"
    tags = await client.get("/agents/tags", headers=carol.headers)
    assert tags.status_code == 200 and [t["name"] for t in tags.json()["tags"]] == ["support"]


async def test_a_member_with_the_permission_manages_agents(client, alice, manager):
    agent = await make_agent(client, manager, name="Managed")
    assert agent["userId"] == "user_manager"
    tag = await make_tag(client, manager, "ops")
    patched = await client.patch(
        "/agents",
        json={"agentId": agent["id"], "tagIds": [tag["id"]], "role": "Be precise."},
        headers=manager.headers,
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["agent"]["role"] == "Be precise."
    deleted = await client.delete(f"/agents?agentId={agent['id']}", headers=manager.headers)
    assert deleted.status_code == 200
    assert deleted.json() == {"success": True, "message": "Agent deleted"}
    gone = await client.get(f"/agents?agentId={agent['id']}", headers=alice.headers)
    assert gone.status_code == 404


async def test_patch_changes_only_what_was_sent(client, alice):
    kb1, kb2 = await make_kb(client, alice, name="One"), await make_kb(client, alice, name="Two")
    skill = await make_skill(client, alice, "one")
    agent = await make_agent(
        client, alice, description="d", role="r", knowledgeBaseIds=[kb1["id"]], skillIds=[skill]
    )
    response = await client.patch(
        "/agents",
        json={
            "agentId": agent["id"],
            "name": "Renamed",
            "knowledgeBaseIds": [kb2["id"], kb1["id"]],
        },
        headers=alice.headers,
    )
    assert response.status_code == 200, response.text
    patched = response.json()["agent"]
    assert (patched["name"], patched["description"], patched["role"]) == ("Renamed", "d", "r")
    assert patched["knowledgeBaseIds"] == [kb2["id"], kb1["id"]] and patched["skillIds"] == [skill]
    assert patched["createdAt"] == agent["createdAt"] and patched["updatedAt"] > agent["updatedAt"]
    cleared = await client.patch(
        "/agents",
        json={"agentId": agent["id"], "description": None, "skillIds": None},
        headers=alice.headers,
    )
    assert (
        cleared.json()["agent"]["description"] == "" and cleared.json()["agent"]["skillIds"] == []
    )


async def test_a_foreign_agent_answers_exactly_like_a_missing_one(client, alice, bob):
    theirs = await make_agent(client, bob)
    missing = await client.get("/agents?agentId=999999", headers=alice.headers)
    assert missing.status_code == 404 and missing.json() == {"error": "Agent not found"}
    for response in (
        await client.get(f"/agents?agentId={theirs['id']}", headers=alice.headers),
        await client.patch(
            "/agents", json={"agentId": theirs["id"], "name": "x"}, headers=alice.headers
        ),
        await client.delete(f"/agents?agentId={theirs['id']}", headers=alice.headers),
    ):
        assert response.status_code == 404
        assert response.json() == missing.json()
    still = await client.get(f"/agents?agentId={theirs['id']}", headers=bob.headers)
    assert still.status_code == 200 and still.json()["agent"]["name"] == "Helper"


@pytest.mark.parametrize("bad", ["abc", "0", "-3", "1.5", "", "99999999999999999999"])
async def test_bad_agent_ids_are_400(client, alice, bad):
    expected = {"error": "Valid agent ID is required"}
    for response in (
        await client.get(f"/agents?agentId={bad}", headers=alice.headers),
        await client.delete(f"/agents?agentId={bad}", headers=alice.headers),
        await client.patch("/agents", json={"agentId": bad, "name": "x"}, headers=alice.headers),
    ):
        assert response.status_code == 400
        assert response.json() == expected


async def test_missing_agent_id_on_patch_and_delete_is_400(client, alice):
    for response in (
        await client.delete("/agents", headers=alice.headers),
        await client.patch("/agents", json={"name": "x"}, headers=alice.headers),
        await client.patch("/agents", json={"agentId": True}, headers=alice.headers),
    ):
        assert response.status_code == 400
        assert response.json() == {"error": "Valid agent ID is required"}


@pytest.mark.parametrize(
    ("body", "message", "field"),
    [
        ({}, "Name is required", "name"),
        ({"name": "   "}, "Name is required", "name"),
        ({"name": "x" * 201}, "Name must be at most 200 characters", "name"),
        ({"name": "x", "model": "acme:big"}, "Unknown provider 'acme' in model", "model"),
        ({"name": "x", "model": "local:llama-3-70b"}, "Unknown local chat model", "model"),
        ({"name": "x", "model": "gpt-4o"}, "model must have the form provider:model", "model"),
        (
            {"name": "x", "knowledgeBaseIds": ["a"]},
            "knowledgeBaseIds must hold",
            "knowledgeBaseIds",
        ),
        ({"name": "x", "skillIds": [0]}, "skillIds must hold positive integer ids", "skillIds"),
        ({"name": "x", "tagIds": [424242]}, "Unknown tag ids: 424242", "tagIds"),
        ({"name": "x", "description": "d" * 4001}, "description must be at most", "description"),
    ],
)
async def test_create_refuses_bad_input(client, alice, owner_engine, body, message, field):
    response = await client.post("/agents", json=body, headers=alice.headers)
    assert response.status_code == 400
    error = response.json()
    assert message in error["error"]
    assert error["details"][0]["field"] == field
    async with owner_engine.connect() as connection:
        assert await connection.scalar(text("SELECT count(*) FROM agents")) == 0


async def test_wrongly_typed_bodies_are_400(client, alice):
    for body in ({"name": 5}, {"name": "x", "knowledgeBaseIds": "1"}, [1, 2]):
        response = await client.post("/agents", json=body, headers=alice.headers)
        assert response.status_code == 400
        assert set(response.json()) <= {"error", "details"}


async def test_a_knowledge_base_of_another_organization_is_refused(client, alice, bob):
    mine = await make_kb(client, alice)
    theirs = await make_kb(client, bob)
    response = await client.post(
        "/agents",
        json={"name": "x", "knowledgeBaseIds": [mine["id"], theirs["id"]]},
        headers=alice.headers,
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": f"Unknown knowledge base ids: {theirs['id']}",
        "details": [
            {"field": "knowledgeBaseIds", "message": f"knowledge base {theirs['id']} not found"}
        ],
    }
    agent = await make_agent(client, alice, knowledgeBaseIds=[mine["id"]])
    patched = await client.patch(
        "/agents",
        json={"agentId": agent["id"], "knowledgeBaseIds": [theirs["id"]]},
        headers=alice.headers,
    )
    assert patched.status_code == 400
    again = await client.get(f"/agents?agentId={agent['id']}", headers=alice.headers)
    assert again.json()["agent"]["knowledgeBaseIds"] == [mine["id"]]


async def test_deleting_a_knowledge_base_unlinks_it(client, alice):
    kb = await make_kb(client, alice)
    agent = await make_agent(client, alice, knowledgeBaseIds=[kb["id"]])
    response = await client.delete(f"/kb/manage?kbId={kb['id']}", headers=alice.headers)
    assert response.status_code == 200
    again = await client.get(f"/agents?agentId={agent['id']}", headers=alice.headers)
    assert again.json()["agent"]["knowledgeBaseIds"] == []


async def test_tags_create_list_validate_and_conflict(client, alice, bob):
    first = await make_tag(client, alice, "beta", color="#ABCDEF")
    assert first == {"id": first["id"], "name": "beta", "color": "#abcdef"}
    await make_tag(client, alice, "alpha")
    await make_tag(client, bob, "beta")
    listed = await client.get("/agents/tags", headers=alice.headers)
    assert listed.status_code == 200
    assert [(t["name"], t["color"]) for t in listed.json()["tags"]] == [
        ("alpha", None),
        ("beta", "#abcdef"),
    ]
    duplicate = await client.post("/agents/tags", json={"name": "beta"}, headers=alice.headers)
    assert duplicate.status_code == 409
    assert duplicate.json() == {"error": "A tag with this name already exists"}
    for body, message in [
        ({"name": "x", "color": "red"}, "color must have the form #RRGGBB"),
        ({"name": "x", "color": "#12345"}, "color must have the form #RRGGBB"),
        ({"name": "x", "color": "#GGGGGG"}, "color must have the form #RRGGBB"),
        ({"name": ""}, "Name is required"),
        ({"name": "n" * 65}, "Name must be at most 64 characters"),
    ]:
        response = await client.post("/agents/tags", json=body, headers=alice.headers)
        assert response.status_code == 400
        assert response.json()["error"] == message


async def test_deleting_a_tag_removes_it_from_agents(client, alice, bob):
    tag = await make_tag(client, alice)
    keep = await make_tag(client, alice, "keep")
    agent = await make_agent(client, alice, tagIds=[tag["id"], keep["id"]])
    assert [t["name"] for t in agent["tags"]] == ["keep", "support"]
    foreign = await client.delete(f"/agents/tags?tagId={tag['id']}", headers=bob.headers)
    assert foreign.status_code == 404 and foreign.json() == {"error": "Tag not found"}
    response = await client.delete(f"/agents/tags?tagId={tag['id']}", headers=alice.headers)
    assert response.status_code == 200
    assert response.json() == {"success": True, "message": "Tag deleted"}
    again = await client.get(f"/agents?agentId={agent['id']}", headers=alice.headers)
    assert [t["name"] for t in again.json()["agent"]["tags"]] == ["keep"]
    filtered = await client.get(f"/agents?tagId={tag['id']}", headers=alice.headers)
    assert filtered.json()["agents"] == []
    missing = await client.delete(f"/agents/tags?tagId={tag['id']}", headers=alice.headers)
    assert missing.status_code == 404


async def test_bad_tag_ids_are_400(client, alice):
    for response in (
        await client.delete("/agents/tags?tagId=abc", headers=alice.headers),
        await client.delete("/agents/tags", headers=alice.headers),
        await client.get("/agents?tagId=0", headers=alice.headers),
    ):
        assert response.status_code == 400
        assert response.json() == {"error": "Valid tag ID is required"}


async def test_agents_need_a_token_and_an_organization(client, member):
    assert (await client.get("/agents")).status_code == 401
    orgless = member(org=None)
    response = await client.get("/agents", headers=orgless.headers)
    assert response.status_code == 403
    assert response.json() == {"error": "User is not part of any organization"}


async def test_deleting_an_agent_keeps_its_conversations(client, alice, owner_engine):
    agent = await make_agent(client, alice)
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO conversations (thread_id, org_id, user_id, agent_id, title, "
                "title_source) VALUES (gen_random_uuid(), 'org_a', 'user_alice', :a, 'Hi', 'user')"
            ),
            {"a": agent["id"]},
        )
    response = await client.delete(f"/agents?agentId={agent['id']}", headers=alice.headers)
    assert response.status_code == 200
    async with owner_engine.connect() as connection:
        rows = (await connection.execute(text("SELECT agent_id, title FROM conversations"))).all()
    assert [tuple(r) for r in rows] == [(None, "Hi")]


async def test_openapi_documents_the_agent_routes(session_client):
    document = (await session_client.get("/schema/openapi.json")).json()
    paths = document["paths"]
    assert {"get", "post", "patch", "delete"} <= set(paths["/agents"])
    assert {"get", "post", "delete"} <= set(paths["/agents/tags"])
    assert {"201", "400", "401", "403"} <= set(paths["/agents"]["post"]["responses"])
    assert "409" in paths["/agents/tags"]["post"]["responses"]
    schemas = document["components"]["schemas"]
    for name in ("CreateAgentBody", "AgentResponse", "AgentListResponse", "AgentTagResponse"):
        assert any(key.endswith(name) for key in schemas), name
