"""`POST /kb/search`'s options over HTTP: highlights, filters over `userMetadata` and file
fields, and reranking through a real `/rerank` server on loopback (applied, or failing and
falling back to the fused order with a header, never a 5xx); bad options are clear 400s."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import uvicorn
from litestar.testing import AsyncTestClient

from application.use_cases.search_knowledge_base import RERANK_UNAVAILABLE
from entrypoints.http.app import create_app
from entrypoints.search_config import SearchSettings
from tests.conftest import free_port
from tests.http.helpers import association, make_kb
from tests.http.processing_support import EmbedderOverride, settle
from tests.integration.test_rerank_http import API_KEY, RerankServer

FILES = {
    "wind.txt": ("Wind tunnels measure the flows over a wing at transonic speeds.", "aero"),
    "bread.txt": ("Bread rises when the dough flows slowly overnight.", "kitchen"),
    "notes.txt": ("Meeting notes about the budget for next year.", None),
}


@pytest.fixture(scope="module")
def rerank_url() -> Iterator[str]:
    """The scripted `/rerank` server, on a thread of its own (the tests' event loops come and
    go)."""
    server = uvicorn.Server(
        uvicorn.Config(
            RerankServer(), host="127.0.0.1", port=(port := free_port()), lifespan="off",
            log_config=None, access_log=False, timeout_graceful_shutdown=1,
        )
    )  # fmt: skip
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def app_for(settings, database, registry, rerank: str | None = None):
    search = SearchSettings(
        rerank_model=rerank,
        rerank_api_key=API_KEY if rerank else None,
        rerank_name="rerank-v3.5" if rerank else None,
        rerank_timeout=1.0,
    )
    return create_app(
        dataclasses.replace(settings, search=search), database, EmbedderOverride(registry)
    )


async def seeded(client, who, worker) -> int:
    kb = await make_kb(client, who)
    for name, (text, team) in FILES.items():
        data = text.encode()
        presigned = (
            await client.post(
                "/upload/presigned",
                json={"fileName": name, "contentType": "text/plain", "fileSize": len(data)},
                headers=who.headers,
            )
        ).json()
        parts = urlsplit(presigned["uploadUrl"])
        put = await client.put(
            f"{parts.path}?{parts.query}", content=data, headers={"Content-Type": "text/plain"}
        )
        assert put.status_code == 200, put.text
        metadata = {"team": team, "pages": len(text)} if team else ...
        created = await client.post(
            "/kb/files",
            json=association(
                kb["id"], presigned, fileName=name, contentType="text/plain",
                fileSize=len(data), userMetadata=metadata,
            ),
            headers=who.headers,
        )  # fmt: skip
        assert created.status_code == 201, created.text
    async with worker():
        files = await settle(client, who, kb["id"], count=len(FILES))
    assert {f["processingStatus"] for f in files} == {"completed"}
    return int(kb["id"])


async def search(client, who, **body):
    return await client.post("/kb/search", json=body, headers=who.headers)


async def test_results_carry_highlights_and_filters_pick_the_files(
    settings, database, registry, clean, alice, worker
):
    async with AsyncTestClient(app=app_for(settings, database, registry)) as client:
        kb = await seeded(client, alice, worker)
        response = await search(client, alice, kbId=kb, query="Which flow is measured?")
        assert response.status_code == 200, response.text
        assert response.headers["x-rerank"] == "off"
        results = response.json()["results"]
        by_file = {r["fileName"]: r for r in results}
        wind = by_file["wind.txt"]
        marked = [wind["text"][h["start"] : h["end"]] for h in wind["highlights"]]
        assert marked == ["measure", "flows"]
        assert by_file["notes.txt"]["highlights"] == []

        for filters, names in (
            ({"key": "team", "op": "eq", "value": "aero"}, {"wind.txt"}),
            ({"key": "team", "op": "nin", "value": ["aero"]}, {"bread.txt", "notes.txt"}),
            ({"key": "pages", "op": "gt", "value": 50}, {"wind.txt"}),
            ({"or": [{"key": "fileName", "op": "eq", "value": "notes.txt"},
                     {"key": "team", "op": "eq", "value": "kitchen"}]},
             {"bread.txt", "notes.txt"}),
        ):  # fmt: skip
            found = await search(client, alice, kbId=kb, query="flows", filters=filters)
            assert found.status_code == 200, found.text
            assert {r["fileName"] for r in found.json()["results"]} == names, filters


def deep(levels: int) -> dict:
    node: dict = {"key": "team", "op": "eq", "value": "aero"}
    for _ in range(levels - 1):
        node = {"and": [node]}
    return node


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"filters": {"key": "team", "op": "like", "value": "a"}}, "unknown operator 'like'"),
        ({"filters": deep(6)}, "nested more than 5 deep"),
        (
            {"filters": {"and": [{"key": "k", "op": "eq", "value": n} for n in range(51)]}},
            "more than 50 conditions",
        ),
        ({"filters": {"key": "fileSize", "op": "gt", "value": "big"}}, "compares with a number"),
        ({"filters": {"key": "createdAt", "op": "gt", "value": "yesterday"}}, "ISO 8601"),
        ({"filters": {"key": "team", "op": "in", "value": []}}, "a list of 1 to 100 values"),
        ({"filters": {"key": "team", "op": "gt", "value": True}}, "not booleans"),
        ({"filters": {"and": []}}, "non-empty list"),
        ({"filters": {"key": "team", "op": "eq", "value": {"a": 1}}}, "a value is a string"),
        ({"filters": "team=aero"}, "filters are invalid"),
        ({"rerank": "yes"}, "rerank must be a boolean"),
        ({"rerank": True}, RERANK_UNAVAILABLE),
    ],
)
async def test_bad_options_are_clear_400s(client, alice, body, message):
    kb = await make_kb(client, alice)
    response = await search(client, alice, kbId=kb["id"], query="flows", **body)
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]
    assert deep(5)  # five levels are allowed
    allowed = await search(client, alice, kbId=kb["id"], query="flows", filters=deep(5))
    assert allowed.status_code == 200, allowed.text


async def test_a_reranker_orders_the_results(
    settings, database, registry, clean, alice, worker, rerank_url
):
    app = app_for(settings, database, registry, f"{rerank_url}/cohere/v2/rerank")
    async with AsyncTestClient(app=app) as client:
        kb = await seeded(client, alice, worker)
        query = "notes about the budget"
        response = await search(client, alice, kbId=kb, query=query, topK=2)
        assert response.status_code == 200, response.text
        assert response.headers["x-rerank"] == "applied", response.headers.get("x-rerank-error")
        results = response.json()["results"]
        assert results[0]["fileName"] == "notes.txt"
        assert results[0]["score"] >= results[1]["score"]
        plain = await search(client, alice, kbId=kb, query=query, topK=2, rerank=False)
        assert plain.headers["x-rerank"] == "off"


@pytest.mark.parametrize("path", ["/slow/rerank", "/nonjson/rerank", "/fails/rerank"])
async def test_a_failing_reranker_leaves_the_fused_order_and_says_so(
    settings, database, registry, clean, alice, worker, rerank_url, path
):
    async with AsyncTestClient(app=app_for(settings, database, registry)) as client:
        kb = await seeded(client, alice, worker)
        fused = (await search(client, alice, kbId=kb, query="flows")).json()["results"]
    app = app_for(settings, database, registry, rerank_url + path)
    async with AsyncTestClient(app=app) as client:
        response = await search(client, alice, kbId=kb, query="flows")
    assert response.status_code == 200, response.text
    assert response.headers["x-rerank"] == "failed"
    assert response.headers["x-rerank-error"]
    assert [r["chunkId"] for r in response.json()["results"]] == [r["chunkId"] for r in fused]
