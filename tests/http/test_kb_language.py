"""A knowledge base's `language` end to end: set on creation (english by default), refused
unless it is a search language, changed by PATCH, and the full-text half of search stemming
in it: the index is rewritten when it changes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from domain.knowledge_bases import LANGUAGE_INVALID
from entrypoints.http.app import create_app
from tests.fakes import HashingEmbedder
from tests.http.helpers import make_kb
from tests.http.processing_support import EmbedderOverride, settle, upload

INVALID = {
    "error": LANGUAGE_INVALID,
    "details": [{"field": "language", "message": "expected a search language"}],
}
RIVER = "The river flow is strong where she runs at dawn."
DECOY = "Keep every receipt and file expenses within a month."


@pytest.fixture
async def client(settings, database, clean, registry) -> AsyncIterator[AsyncTestClient]:
    async with AsyncTestClient(app=create_app(settings, database, EmbedderOverride(registry))) as c:
        yield c


async def change(client, who, kb_id: int, **fields):
    return await client.patch("/kb/manage", json={"kbId": kb_id, **fields}, headers=who.headers)


async def test_a_knowledge_base_is_english_unless_created_in_another_language(client, alice):
    assert (await make_kb(client, alice))["language"] == "english"
    assert (await make_kb(client, alice, language=None))["language"] == "english"
    assert (await make_kb(client, alice, language="German"))["language"] == "german"
    listed = (await client.get("/kb/manage", headers=alice.headers)).json()["knowledgeBases"]
    assert [kb["language"] for kb in listed] == ["german", "english", "english"]


@pytest.mark.parametrize("language", ["klingon", "", "pg_catalog.english", 7, ["english"], False])
async def test_creation_refuses_what_is_not_a_search_language(client, alice, language):
    response = await client.post(
        "/kb/manage", json={"name": "Docs", "language": language}, headers=alice.headers
    )
    assert (response.status_code, response.json()) == (400, INVALID)
    assert (await client.get("/kb/manage", headers=alice.headers)).json()["knowledgeBases"] == []


async def test_a_change_sets_the_language_and_cannot_null_it(client, alice):
    kb = await make_kb(client, alice)
    changed = await change(client, alice, kb["id"], language="SIMPLE")
    assert changed.status_code == 200, changed.text
    assert changed.json()["knowledgeBase"]["language"] == "simple"
    for refused in (None, "elvish", 3):
        response = await change(client, alice, kb["id"], language=refused, name="Renamed")
        assert (response.status_code, response.json()) == (400, INVALID)
    (listed,) = (await client.get("/kb/manage", headers=alice.headers)).json()["knowledgeBases"]
    assert (listed["name"], listed["language"]) == ("Docs", "simple")
    renamed = await change(client, alice, kb["id"], name="Renamed")
    assert renamed.json()["knowledgeBase"]["language"] == "simple"


async def first_text(client, who, kb_id: int, query: str) -> str:
    response = await client.post(
        "/kb/search", json={"kbId": kb_id, "query": query}, headers=who.headers
    )
    assert response.status_code == 200, response.text
    return response.json()["results"][0]["text"]


async def matches(owner_engine, kb_id: int, config: str, query: str) -> bool:
    """Whether the river passage's stored full-text index matches `query` read in `config`."""
    async with owner_engine.connect() as connection:
        return await connection.scalar(
            text(
                "SELECT tsv @@ websearch_to_tsquery(CAST(:config AS regconfig), :query) "
                "FROM chunks WHERE knowledge_base_id = :kb AND text LIKE 'The river%'"
            ),
            {"config": config, "query": query, "kb": kb_id},
        )


async def unrelated(query: str, *passages: str) -> bool:
    """Whether the test embedder puts `query` equally far from each passage (no hashed word in
    common with any): the vector half cannot tell them apart."""
    q, *vectors = await HashingEmbedder().embed([query, *passages])
    return all(sum(a * b for a, b in zip(q, v, strict=True)) == 0 for v in vectors)


async def test_the_full_text_index_follows_the_language(client, alice, worker, owner_engine):
    kb = await make_kb(client, alice)
    other = await make_kb(client, alice, name="Other")
    await upload(client, alice, kb["id"], "river.txt", "text/plain", RIVER.encode())
    await upload(client, alice, other["id"], "river.txt", "text/plain", RIVER.encode())
    async with worker():
        await settle(client, alice, kb["id"])
        await settle(client, alice, other["id"])
    for inflected in ("flows", "running"):
        assert await matches(owner_engine, kb["id"], "english", inflected)

    changed = await change(client, alice, kb["id"], language="simple")
    assert changed.status_code == 200, changed.text
    for inflected, exact in (("flows", "flow"), ("running", "runs")):
        assert not await matches(owner_engine, kb["id"], "simple", inflected)
        assert await matches(owner_engine, kb["id"], "simple", exact)
        # Another knowledge base keeps its own language's index.
        assert await matches(owner_engine, other["id"], "english", inflected)

    assert (await change(client, alice, kb["id"], language="english")).status_code == 200
    assert await matches(owner_engine, kb["id"], "english", "flows")


async def test_search_finds_an_inflected_form_by_full_text_in_the_language(client, alice, worker):
    kb = await make_kb(client, alice)
    # The decoy is stored first: the vector half, which cannot tell the two passages apart
    # for these queries (no word in common), ranks it first on the tie, so only the full-text
    # half can put the river passage ahead of it.
    await upload(client, alice, kb["id"], "decoy.txt", "text/plain", DECOY.encode())
    async with worker():
        await settle(client, alice, kb["id"])
    await upload(client, alice, kb["id"], "river.txt", "text/plain", RIVER.encode())
    async with worker():
        files = await settle(client, alice, kb["id"], count=2)
    assert {f["processingStatus"] for f in files} == {"completed"}
    for query in ("flows", "running"):
        assert await unrelated(query, RIVER, DECOY)
        assert await first_text(client, alice, kb["id"], query) == RIVER, query

    assert (await change(client, alice, kb["id"], language="simple")).status_code == 200
    for inflected, exact in (("flows", "flow"), ("running", "runs")):
        assert await first_text(client, alice, kb["id"], inflected) == DECOY, inflected
        assert await first_text(client, alice, kb["id"], exact) == RIVER, exact
