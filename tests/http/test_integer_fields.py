"""Ids and sizes in bodies are JSON integers only (CONTRACT.md: `2.0` is refused like `"2"`):
the issue's cases and one of each kind of integer field, answered 400 in the contract's shape
with a `details` entry for the field, and nothing changed. Query-string integers are text by
nature and keep their rules. (Every integer field of every body: tests/unit/test_integer_fields.)
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.http.helpers import make_kb

NOT_AN_INTEGER = "must be a JSON integer"
KB_ID_REQUIRED = "Valid knowledge base ID is required"


def named(field: str, message: str = NOT_AN_INTEGER) -> list[dict[str, str]]:
    return [{"field": field, "message": message}]


@pytest.mark.parametrize("kb_id", ["{id}.0", "{id}e0", '"{id}"'])
async def test_a_knowledge_base_id_must_be_a_json_integer(client, alice, kb_id):
    kb = await make_kb(client, alice)
    number = kb_id.format(id=kb["id"])
    changed = await client.patch(
        "/kb/manage",
        content=f'{{"kbId": {number}, "name": "Renamed"}}',
        headers={**alice.headers, "Content-Type": "application/json"},
    )
    assert (changed.status_code, changed.json()) == (
        400,
        {"error": KB_ID_REQUIRED, "details": named("kbId")},
    )
    searched = await client.post(
        "/kb/search",
        content=f'{{"kbIds": [{number}], "query": "q"}}',
        headers={**alice.headers, "Content-Type": "application/json"},
    )
    assert (searched.status_code, searched.json()) == (
        400,
        {"error": KB_ID_REQUIRED, "details": named("kbIds")},
    )
    listed = await client.get("/kb/manage", headers=alice.headers)
    assert [k["name"] for k in listed.json()["knowledgeBases"]] == ["Docs"]
    # The same knowledge base named by a JSON integer, and in the query string by its digits.
    assert (
        await client.patch(
            "/kb/manage", json={"kbId": kb["id"], "name": "R"}, headers=alice.headers
        )
    ).status_code == 200
    assert (
        await client.get(f"/kb/files?kbId={kb['id']}", headers=alice.headers)
    ).status_code == 200


async def test_an_agents_linked_ids_must_be_json_integers(client, alice):
    kb = await make_kb(client, alice)
    body: dict[str, Any] = {"name": "Helper", "knowledgeBaseIds": [float(kb["id"])]}
    refused = await client.post("/agents", json=body, headers=alice.headers)
    assert (refused.status_code, refused.json()) == (
        400,
        {
            "error": "knowledgeBaseIds must hold positive integer ids",
            "details": named("knowledgeBaseIds"),
        },
    )
    assert (await client.get("/agents", headers=alice.headers)).json()["agents"] == []
    body["knowledgeBaseIds"] = [kb["id"]]
    assert (await client.post("/agents", json=body, headers=alice.headers)).status_code == 201


@pytest.mark.parametrize(
    ("method", "path", "body", "error", "field"),
    [
        ("POST", "/kb/search", {"kbId": 1, "query": "q", "topK": 3.0}, "topK", "topK"),
        (
            "POST",
            "/kb/manage",
            {"name": "x", "chunkSize": 256.0},
            "Invalid request body",
            "chunkSize",
        ),
        (
            "POST",
            "/upload/presigned",
            {"fileName": "a.md", "contentType": "text/markdown", "fileSize": 5.0},
            "File size must be a non-negative integer",
            "fileSize",
        ),
        (
            "POST",
            "/admin/invitations",
            {"email": "new@a.test", "role": "org:member", "expiresInDays": 7.0},
            "expiresInDays must be an integer",
            "expiresInDays",
        ),
        (
            "PATCH",
            "/agents",
            {"agentId": "1", "name": "x"},
            "Valid agent ID is required",
            "agentId",
        ),
    ],
)
async def test_sizes_limits_and_days_must_be_json_integers(
    client, alice, method, path, body, error, field
):
    response = await client.request(method, path, json=body, headers=alice.headers)
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith(error)
    assert response.json()["details"] == named(field)


@pytest.mark.parametrize(
    ("sent", "field"),
    [
        ({"sidebarPinnedAppIds": [1, 2.0]}, "settings.sidebarPinnedAppIds[1]"),
        ({"defaultAgentId": 1.0}, "settings.defaultAgentId"),
    ],
)
async def test_the_settings_ids_must_be_json_integers(client, alice, sent, field):
    response = await client.put("/orgSettings", json={"settings": sent}, headers=alice.headers)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "Bad Request"
    assert {"field": field, "message": NOT_AN_INTEGER} in response.json()["details"]
