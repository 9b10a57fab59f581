"""Files through the whole pipeline: HTTP upload, the pgqueuer worker, extraction, chunking,
embedding into pgvector, and search."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from dishka import Provider, Scope, provide
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from application.ports.structured_extractor import StructuredExtractionFailed, StructuredExtractor
from entrypoints.http.app import create_app
from entrypoints.worker.jobs import build_worker
from tests.fakes import HashingEmbedder
from tests.http.helpers import make_kb
from tests.http.processing_support import HANDBOOK, EmbedderOverride, settle, upload


@pytest.fixture
async def client(settings, database, clean, registry) -> AsyncIterator[AsyncTestClient]:
    async with AsyncTestClient(app=create_app(settings, database, EmbedderOverride(registry))) as c:
        yield c


async def until_indexed(client, who, within: float = 30.0) -> dict:
    """The only knowledge base once it is no longer re-embedding."""
    deadline = time.monotonic() + within
    while True:
        (current,) = (await client.get("/kb/manage", headers=who.headers)).json()["knowledgeBases"]
        if current["status"] != "reindexing":
            return current
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)


async def test_a_markdown_file_is_processed_and_found(client, alice, worker, settings):
    kb = await make_kb(client, alice)
    record = await upload(
        client, alice, kb["id"], "handbook.md", "text/markdown", HANDBOOK.encode()
    )
    async with worker():
        (done,) = await settle(client, alice, kb["id"])
    assert done["processingStatus"] == "completed" and done["processingError"] is None
    stored = settings.data_dir.resolve() / "objects" / record["contentKey"]
    assert "Everyone gets thirty days" in stored.read_text()
    found = await client.post(
        "/kb/search",
        json={"kbId": kb["id"], "query": "how many holiday days"},
        headers=alice.headers,
    )
    assert found.status_code == 200, found.text
    results = found.json()["results"]
    assert results[0]["fileName"] == "handbook.md" and "thirty days" in results[0]["text"]
    assert results[0]["fileId"] == record["fileId"] and results[0]["score"] > 0
    listed = (await client.get("/kb/manage", headers=alice.headers)).json()["knowledgeBases"]
    assert listed[0]["status"] == "ready"


async def test_bad_files_fail_with_a_reason_and_the_worker_keeps_going(
    client, alice, worker, settings, owner_engine
):
    kb = await make_kb(client, alice)
    await upload(client, alice, kb["id"], "empty.txt", "text/plain", b"")
    await upload(client, alice, kb["id"], "broken.pdf", "application/pdf", b"%PDF-1.7 garbage")
    missing = await upload(client, alice, kb["id"], "gone.md", "text/markdown", b"# x\n\ny\n")
    (settings.data_dir.resolve() / "objects" / missing["fileKey"]).unlink()
    await upload(client, alice, kb["id"], "good.md", "text/markdown", HANDBOOK.encode())
    async with worker():
        files = await settle(client, alice, kb["id"], count=4)
    by_name = {f["fileName"]: f for f in files}
    assert by_name["good.md"]["processingStatus"] == "completed"
    for name in ("empty.txt", "broken.pdf", "gone.md"):
        assert by_name[name]["processingStatus"] == "parse_failed", by_name[name]
        assert by_name[name]["processingError"]
    assert "not found in storage" in by_name["gone.md"]["processingError"]
    async with owner_engine.connect() as connection:
        chunk_files = (
            await connection.scalars(text("SELECT DISTINCT file_record_id FROM chunks"))
        ).all()
    assert chunk_files == [by_name["good.md"]["id"]]


async def test_transient_failures_are_retried_then_end_in_chunk_failed(
    client, alice, worker, registry
):
    registry.embedder.failure = ConnectionError("provider unreachable")
    kb = await make_kb(client, alice)
    await upload(client, alice, kb["id"], "a.md", "text/markdown", HANDBOOK.encode())
    async with worker(attempts=3):
        (done,) = await settle(client, alice, kb["id"])
    assert done["processingStatus"] == "chunk_failed"
    assert "after several attempts" in done["processingError"]
    assert registry.embedder.calls == 3


async def test_reprocessing_replaces_chunks_instead_of_adding(client, alice, worker, owner_engine):
    kb = await make_kb(client, alice)
    record = await upload(client, alice, kb["id"], "a.md", "text/markdown", HANDBOOK.encode())
    async with worker():
        await settle(client, alice, kb["id"])
        async with owner_engine.connect() as connection:
            before = await connection.scalar(text("SELECT count(*) FROM chunks"))
        again = await client.post(
            "/kb/files/reprocess",
            json={"kbId": kb["id"], "fileId": record["fileId"]},
            headers=alice.headers,
        )
        assert again.status_code == 202 and again.json()["file"]["processingStatus"] == "parsing"
        await asyncio.sleep(0.3)
        (done,) = await settle(client, alice, kb["id"])
    assert done["processingStatus"] == "completed"
    async with owner_engine.connect() as connection:
        assert await connection.scalar(text("SELECT count(*) FROM chunks")) == before > 0


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"query": "x"}, 400, "Valid knowledge base ID is required"),
        ({"kbId": "abc", "query": "x"}, 400, "Valid knowledge base ID is required"),
        ({"kbId": "{id}"}, 400, "query is required"),
        ({"kbId": "{id}", "query": "x", "topK": 51}, 400, "topK must be an integer"),
        ({"kbId": 987654, "query": "x"}, 404, "Knowledge base not found"),
        ({"kbIds": ["{id}", 987654], "query": "x"}, 404, "Knowledge base not found"),
    ],
)
async def test_search_errors(client, alice, body, status, error):
    kb = await make_kb(client, alice)
    body = {
        k: (
            [kb["id"] if i == "{id}" else i for i in v]
            if isinstance(v, list)
            else kb["id"]
            if v == "{id}"
            else v
        )
        for k, v in body.items()
    }
    response = await client.post("/kb/search", json=body, headers=alice.headers)
    assert (response.status_code, response.json()["error"][: len(error)]) == (status, error)


async def test_search_never_crosses_organizations(client, alice, bob, worker):
    mine = await make_kb(client, alice)
    theirs = await make_kb(client, bob)
    await upload(client, alice, mine["id"], "a.md", "text/markdown", HANDBOOK.encode())
    await upload(client, bob, theirs["id"], "b.md", "text/markdown", HANDBOOK.encode())
    async with worker():
        await settle(client, alice, mine["id"])
        await settle(client, bob, theirs["id"])
    foreign = await client.post(
        "/kb/search", json={"kbId": theirs["id"], "query": "holiday"}, headers=alice.headers
    )
    assert foreign.status_code == 404
    own = await client.post(
        "/kb/search",
        json={"kbIds": [mine["id"]], "query": "holiday", "topK": 50},
        headers=alice.headers,
    )
    assert {r["fileName"] for r in own.json()["results"]} == {"a.md"}


async def test_the_reaper_fails_files_left_without_a_job(client, alice, owner_engine, app_pool):
    kb = await make_kb(client, alice)
    record = await upload(client, alice, kb["id"], "a.md", "text/markdown", b"# a\n\nb\n")
    async with owner_engine.begin() as connection:
        await connection.execute(text("DELETE FROM pgqueuer"))
        await connection.execute(
            text("UPDATE knowledge_base_files SET updated_at = now() - interval '1 hour'")
        )
    async with app_pool.acquire() as connection:
        reaped = await connection.fetch(
            "SELECT * FROM ap_reap_stalled_files($1)", timedelta(minutes=2)
        )
    assert [(r["file_record_id"], r["processing_status"]) for r in reaped] == [
        (record["id"], "parse_failed")
    ]
    files = (await client.get(f"/kb/files?kbId={kb['id']}", headers=alice.headers)).json()
    assert "Reprocess the file" in files["files"][0]["processingError"]


def test_hashing_embedder_is_deterministic():
    a = asyncio.run(HashingEmbedder().embed(["same text"]))
    assert a == asyncio.run(HashingEmbedder().embed(["same text"]))


async def test_changing_the_embedding_model_reembeds_then_swaps(
    client, alice, worker, owner_engine
):
    kb = await make_kb(client, alice)
    await upload(client, alice, kb["id"], "a.md", "text/markdown", HANDBOOK.encode())
    async with worker():
        await settle(client, alice, kb["id"])
        changed = await client.patch(
            "/kb/manage",
            json={"kbId": kb["id"], "embeddingModel": "openai:text-embedding-3-small"},
            headers=alice.headers,
        )
        assert changed.json()["knowledgeBase"]["status"] == "reindexing"
        current = await until_indexed(client, alice)
    assert current["status"] == "ready"
    assert (current["embeddingModel"], current["embeddingDimensions"]) == (
        "openai:text-embedding-3-small",
        1536,
    )
    async with owner_engine.connect() as connection:
        models = (
            await connection.scalars(
                text("SELECT DISTINCT embedding_model || ':' || dimensions FROM chunks")
            )
        ).all()
    assert models == ["openai:text-embedding-3-small:1536"]
    found = await client.post(
        "/kb/search",
        json={"kbId": kb["id"], "query": "receipts expenses"},
        headers=alice.headers,
    )
    assert "receipt" in found.json()["results"][0]["text"]


async def test_a_model_that_cannot_embed_keeps_the_old_index(
    client, alice, worker, registry, owner_engine
):
    from application.ports.embedder import EmbeddingFailed

    kb = await make_kb(client, alice)
    await upload(client, alice, kb["id"], "a.md", "text/markdown", HANDBOOK.encode())
    async with worker():
        await settle(client, alice, kb["id"])
        registry.embedder.failure = EmbeddingFailed("The model is not available")
        await client.patch(
            "/kb/manage",
            json={"kbId": kb["id"], "embeddingModel": "openai:text-embedding-3-small"},
            headers=alice.headers,
        )
        current = await until_indexed(client, alice)
    assert current["status"] == "error"
    assert current["embeddingModel"] == "local:all-MiniLM-L6-v2"
    async with owner_engine.connect() as connection:
        models = (
            await connection.scalars(text("SELECT DISTINCT embedding_model FROM chunks"))
        ).all()
    assert models == ["local:all-MiniLM-L6-v2"]


class ScriptedExtractor:
    def __init__(self, answer: dict | Exception) -> None:
        self.answer = answer
        self.seen: list[str] = []

    async def extract(self, *, model, schema, text, file_name, meter):
        self.seen.append(text)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class ExtractorOverride(Provider):
    def __init__(self, extractor: ScriptedExtractor) -> None:
        super().__init__()
        self._extractor = extractor

    @provide(scope=Scope.APP)
    def structured(self) -> StructuredExtractor:
        return self._extractor


SCHEMA = {
    "type": "object",
    "properties": {"holidayDays": {"type": "integer"}},
    "required": ["holidayDays"],
}


@pytest.mark.parametrize(
    ("answer", "status", "error"),
    [
        ({"holidayDays": 30}, "completed", None),
        (
            StructuredExtractionFailed("The model did not answer with JSON."),
            "extract_failed",
            "The model did not answer with JSON.",
        ),
    ],
)
async def test_structured_extraction(
    settings, database, clean, alice, registry, answer, status, error
):
    extractor = ScriptedExtractor(answer)
    overrides = (EmbedderOverride(registry), ExtractorOverride(extractor))
    async with AsyncTestClient(app=create_app(settings, database, *overrides)) as client:
        kb = await make_kb(
            client, alice, extractionModel="openai:gpt-4o-mini", extractionSchema=SCHEMA
        )
        await upload(client, alice, kb["id"], "a.md", "text/markdown", HANDBOOK.encode())
        job_worker, container = build_worker(settings, database, *overrides, concurrency=1)
        task = asyncio.create_task(job_worker.run())
        try:
            (done,) = await settle(client, alice, kb["id"])
        finally:
            job_worker.stop()
            await asyncio.wait_for(task, 30)
            await container.close()
    assert (done["processingStatus"], done["processingError"]) == (status, error)
    assert done["extractedData"] == (answer if isinstance(answer, dict) else None)
    assert "thirty days" in extractor.seen[0]
