"""Hostile text, ids and headers through the whole app against real Postgres (issue 12): NUL
characters, display-control characters in names, non-canonical ids, oversized tokens and
headers each get a 4xx in the contract's shape naming the field, never a 500, and nothing is
stored. (The HTTP edge's decoding has its own tests in test_hostile_input.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

THREAD = "7651c7ca-d1c8-496d-a159-8910b84ab906"  # fixed: parallel workers must collect the same ids
MESSAGE = [{"role": "user", "parts": [{"type": "text", "text": "hello"}]}]


def assert_refused(response: Any, field: str | None, status: int = 400) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) <= {"error", "details"} and isinstance(body["error"], str)
    if field is not None:
        assert [d["field"] for d in body["details"]] == [field], body
    assert response.headers.get("x-request-id")


async def count(owner_engine: Any, table: str) -> int:
    async with owner_engine.connect() as connection:
        return (await connection.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "Do\u0000cs"}, "name"),
        ({"name": "Docs", "description": "a\u0000b"}, "description"),
        ({"name": "\u202eDocs"}, "name"),
        ({"name": "Do\u2066cs\u2069"}, "name"),
        ({"name": "Do\u0007cs"}, "name"),
        (
            {"name": "Docs", "extractionSchema": {"properties": {"a\u0000": {"type": "string"}}}},
            "extractionSchema",
        ),
        (
            {"name": "Docs", "extractionSchema": {"properties": {"a": {"enum": ["x\u0000"]}}}},
            "extractionSchema",
        ),
        ({"name": "Docs", "extractionModel": "openai:gpt\u0000"}, "extractionModel"),
    ],
)
async def test_knowledge_base_text_with_nul_or_controls_is_400(
    client, alice, owner_engine, body, field
):
    response = await client.post("/kb/manage", json=body, headers=alice.headers)
    assert_refused(response, field)
    assert await count(owner_engine, "knowledge_bases") == 0


async def test_changing_a_knowledge_base_follows_the_same_rules(client, alice):
    made = await client.post("/kb/manage", json={"name": "Docs"}, headers=alice.headers)
    kb_id = made.json()["knowledgeBase"]["id"]
    for body, field in (({"name": "\u202dX"}, "name"), ({"description": "\u0000"}, "description")):
        response = await client.patch(
            "/kb/manage", json={"kbId": kb_id, **body}, headers=alice.headers
        )
        assert_refused(response, field)
    listed = await client.get("/kb/manage", headers=alice.headers)
    assert [kb["name"] for kb in listed.json()["knowledgeBases"]] == ["Docs"]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/agents", {"name": "Hel\u0000per"}, "name"),
        ("/agents", {"name": "Helper", "description": "\u0000"}, "description"),
        ("/agents", {"name": "Helper", "role": "Answer.\u0000"}, "role"),
        ("/agents", {"name": "\u2067Helper"}, "name"),
        ("/agents", {"name": "Helper", "model": "openai:gpt\u0000"}, "model"),
        ("/agents/tags", {"name": "sup\u0000port"}, "name"),
        ("/agents/tags", {"name": "sup\u202eport"}, "name"),
    ],
)
async def test_agent_and_tag_text_with_nul_or_controls_is_400(
    client, alice, owner_engine, path, body, field
):
    assert_refused(await client.post(path, json=body, headers=alice.headers), field)
    assert await count(owner_engine, "agents") == 0
    assert await count(owner_engine, "agent_tags") == 0


async def test_search_query_with_nul_is_400(client, alice):
    response = await client.post(
        "/kb/search", json={"kbId": 1, "query": "leave\u0000policy"}, headers=alice.headers
    )
    assert_refused(response, "query")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            {"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi\u0000"}]}]},
            "messages[0].parts[0].text",
        ),
        ({"messages": MESSAGE, "title": "Trip\u0000"}, "title"),
        ({"messages": MESSAGE, "title": "\u202eTrip"}, "title"),
    ],
)
async def test_chat_text_with_nul_is_400_and_nothing_is_stored(
    client, alice, owner_engine, body, field
):
    response = await client.post("/chat", json={"agentId": 1, **body}, headers=alice.headers)
    assert_refused(response, field)
    assert await count(owner_engine, "conversations") == 0


async def test_rename_with_a_bidirectional_override_is_400(client, alice):
    response = await client.patch(
        "/api/renameConversation",
        json={"threadId": THREAD, "name": "\u202egnp.exe"},
        headers=alice.headers,
    )
    assert_refused(response, "name")


@pytest.mark.parametrize(
    "thread_id",
    [
        "{" + THREAD + "}",
        "urn:uuid:" + THREAD,
        " " + THREAD,
        THREAD + "0" * 5000,
    ],
)
async def test_non_canonical_thread_ids_are_400(client, alice, thread_id):
    response = await client.get(
        "/getConversation", params={"threadId": thread_id}, headers=alice.headers
    )
    assert_refused(response, None)
    assert response.json()["error"] == "threadId must be a valid UUID"


@pytest.mark.parametrize("kb_id", ["+1", "1.0", "\u0663", "9" * 5000, str(2**63)])
async def test_non_canonical_integer_ids_are_400(client, alice, kb_id):
    response = await client.get("/kb/files", params={"kbId": kb_id}, headers=alice.headers)
    assert_refused(response, None)
    assert response.json()["error"] == "Valid knowledge base ID is required"


async def test_a_token_over_16_kib_is_401_unread(client, alice):
    response = await client.get(
        "/agents", headers={"Authorization": "Bearer " + "a" * (16 * 1024 + 1)}
    )
    assert (response.status_code, response.json()) == (401, {"error": "Unauthorized"})
    assert (await client.get("/agents", headers=alice.headers)).status_code == 200


async def test_headers_over_64_kib_are_431(client, alice):
    padding = {f"x-pad-{i}": "p" * 1024 for i in range(70)}
    response = await client.get("/agents", headers={**alice.headers, **padding})
    assert response.status_code == 431, response.text
    assert response.json() == {"error": "Request Header Fields Too Large"}
    assert response.headers.get("x-request-id")
    fewer = {f"x-pad-{i}": "p" * 1024 for i in range(40)}
    assert (await client.get("/agents", headers={**alice.headers, **fewer})).status_code == 200
