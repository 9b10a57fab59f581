"""`/kb/manage` end to end against real Postgres."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tests.http.helpers import add_file, make_kb

KB_FIELDS = {
    "id",
    "name",
    "description",
    "embeddingModel",
    "embeddingDimensions",
    "extractionModel",
    "extractionSchema",
    "source",
    "inboundEmailAddress",
    "trigger",
    "createdAt",
    "updatedAt",
    "userId",
    "fileCount",
    "lastFileUploadedAt",
    "totalSize",
    "status",
    "chunkSize",
    "chunkOverlap",
    "language",
}


async def test_create_returns_201_with_the_spec_fields(client, alice):
    response = await client.post(
        "/kb/manage",
        json={
            "name": "Handbook",
            "description": "HR",
            "extractionModel": "openai:gpt-4o-mini",
            "extractionSchema": {"type": "object", "properties": {"a": {"type": "string"}}},
        },
        headers=alice.headers,
    )
    assert response.status_code == 201
    body = response.json()
    assert body["success"] is True
    kb = body["knowledgeBase"]
    assert set(kb) == KB_FIELDS
    assert kb["embeddingModel"] == "local:all-MiniLM-L6-v2" and kb["embeddingDimensions"] == 384
    assert (kb["userId"], kb["fileCount"], kb["totalSize"], kb["status"]) == (
        "user_alice",
        0,
        0,
        "ready",
    )
    assert kb["lastFileUploadedAt"] is None and kb["extractionModel"] == "openai:gpt-4o-mini"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "Name is required"),
        ({"name": "  "}, "Name is required"),
        ({"name": "x", "embeddingModel": "acme:embed"}, "Unknown provider 'acme'"),
        ({"name": "x", "embeddingDimensions": 1536}, "produces 384-dimensional embeddings"),
        ({"name": "x", "embeddingModel": "openai:custom"}, "embeddingDimensions is required"),
        ({"name": "x", "extractionSchema": {"type": "string"}}, "must describe an object"),
        ({"name": "x", "chunkSize": 10}, "chunkSize must be between 32 and 8192"),
        ({"name": "x", "chunkSize": 100, "chunkOverlap": 50}, "chunkOverlap must be at least 0"),
    ],
)
async def test_create_refuses_bad_input(client, alice, owner_engine, body, message):
    response = await client.post("/kb/manage", json=body, headers=alice.headers)
    assert response.status_code == 400
    assert message in response.json()["error"]
    async with owner_engine.connect() as connection:
        assert await connection.scalar(text("SELECT count(*) FROM knowledge_bases")) == 0


async def test_list_is_scoped_to_the_organization_with_file_figures(client, alice, bob):
    first = await make_kb(client, alice, name="First")
    second = await make_kb(client, alice, name="Second")
    await make_kb(client, bob, name="Theirs")
    await add_file(client, alice, first["id"])
    await add_file(client, alice, first["id"])
    response = await client.get("/kb/manage", headers=alice.headers)
    assert response.status_code == 200
    listed = response.json()["knowledgeBases"]
    assert [kb["name"] for kb in listed] == ["Second", "First"]
    by_name = {kb["name"]: kb for kb in listed}
    assert (by_name["First"]["fileCount"], by_name["First"]["totalSize"]) == (2, 10)
    assert by_name["First"]["status"] == "processing"
    assert by_name["First"]["lastFileUploadedAt"] is not None
    assert by_name["Second"]["status"] == "ready" and second["id"] == by_name["Second"]["id"]


async def test_patch_changes_the_fields_sent(client, alice):
    kb = await make_kb(client, alice, description="keep")
    response = await client.patch(
        "/kb/manage",
        json={"kbId": kb["id"], "name": "Renamed", "extractionSchema": None},
        headers=alice.headers,
    )
    assert response.status_code == 200
    changed = response.json()["knowledgeBase"]
    assert (changed["name"], changed["description"]) == ("Renamed", "keep")
    assert changed["updatedAt"] >= kb["updatedAt"]
    resized = await client.patch(
        "/kb/manage", json={"kbId": kb["id"], "chunkSize": 512}, headers=alice.headers
    )
    assert (resized.json()["knowledgeBase"]["chunkSize"], kb["chunkSize"]) == (512, 256)
    assert resized.json()["knowledgeBase"]["chunkOverlap"] == 32


async def test_patch_embedding_model_with_files_goes_reindexing(client, alice, owner_engine):
    kb = await make_kb(client, alice)
    await add_file(client, alice, kb["id"])
    response = await client.patch(
        "/kb/manage",
        json={"kbId": kb["id"], "embeddingModel": "openai:text-embedding-3-small"},
        headers=alice.headers,
    )
    assert response.status_code == 200
    changed = response.json()["knowledgeBase"]
    assert changed["status"] == "reindexing"
    assert changed["embeddingModel"] == "local:all-MiniLM-L6-v2"
    async with owner_engine.connect() as connection:
        kinds = (await connection.scalars(text("SELECT entrypoint FROM pgqueuer"))).all()
    assert sorted(kinds) == ["file.process", "kb.reembed"]


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"name": "x"}, 400, "Valid knowledge base ID is required"),
        ({"kbId": "abc", "name": "x"}, 400, "Valid knowledge base ID is required"),
        ({"kbId": 999999, "name": "x"}, 404, "Knowledge base not found"),
        ({"kbId": "{id}", "embeddingModel": "zzz:y"}, 400, "Unknown provider 'zzz'"),
        ({"kbId": "{id}", "name": ""}, 400, "Name is required"),
    ],
)
async def test_patch_errors(client, alice, body, status, error):
    kb = await make_kb(client, alice)
    body = {k: (kb["id"] if v == "{id}" else v) for k, v in body.items()}
    response = await client.patch("/kb/manage", json=body, headers=alice.headers)
    assert (response.status_code, response.json()["error"][: len(error)]) == (status, error)


async def test_another_organizations_knowledge_base_looks_missing(client, alice, bob):
    kb = await make_kb(client, alice)
    foreign = [
        await client.patch("/kb/manage", json={"kbId": kb["id"], "name": "x"}, headers=bob.headers),
        await client.delete(f"/kb/manage?kbId={kb['id']}", headers=bob.headers),
        await client.get(f"/kb/files?kbId={kb['id']}", headers=bob.headers),
    ]
    missing = await client.get("/kb/files?kbId=987654", headers=bob.headers)
    for response in foreign:
        assert response.status_code == 404
        assert response.json() == missing.json() == {"error": "Knowledge base not found"}
    still = await client.get("/kb/manage", headers=alice.headers)
    assert still.json()["knowledgeBases"][0]["name"] == "Docs"


async def test_delete_removes_files_rows_and_stored_objects(client, alice, settings, owner_engine):
    kb = await make_kb(client, alice)
    record = await add_file(client, alice, kb["id"])
    stored = settings.data_dir.resolve() / "objects" / record["fileKey"]
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_bytes(b"hello")
    response = await client.delete(f"/kb/manage?kbId={kb['id']}", headers=alice.headers)
    assert response.status_code == 200
    assert response.json()["success"] is True and response.json()["message"]
    assert not stored.exists()
    async with owner_engine.connect() as connection:
        assert await connection.scalar(text("SELECT count(*) FROM knowledge_base_files")) == 0
    again = await client.delete(f"/kb/manage?kbId={kb['id']}", headers=alice.headers)
    assert again.status_code == 404


@pytest.mark.parametrize("query", ["", "?kbId=", "?kbId=abc", "?kbId=-1", "?kbId=1.5"])
async def test_delete_needs_a_valid_id(client, alice, query):
    response = await client.delete(f"/kb/manage{query}", headers=alice.headers)
    assert response.status_code == 400
    assert response.json() == {"error": "Valid knowledge base ID is required"}
