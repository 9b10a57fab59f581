"""The whole pipeline with the real bundled embedding model (all-MiniLM-L6-v2), no doubles."""

from __future__ import annotations

import asyncio

from litestar.testing import AsyncTestClient

from entrypoints.http.app import create_app
from entrypoints.worker.jobs import build_worker
from tests.http.helpers import make_kb
from tests.http.processing_support import settle, upload

POLICY = (
    "# Leave\n\nStaff receive thirty days of paid vacation each calendar year.\n\n"
    "# Travel\n\nTrain tickets are reimbursed in second class only.\n\n"
    "# Equipment\n\nLaptops are replaced every three years by the IT team.\n"
)


async def test_semantic_search_with_the_bundled_model(settings, database, clean, alice):
    async with AsyncTestClient(app=create_app(settings, database)) as client:
        kb = await make_kb(client, alice)
        await upload(client, alice, kb["id"], "policy.md", "text/markdown", POLICY.encode())
        # As `agent-platform worker` does: the model loads beside the first job.
        worker, container = build_worker(settings, database, concurrency=1, warm_up=True)
        task = asyncio.create_task(worker.run())
        try:
            (done,) = await settle(client, alice, kb["id"], within=120)
        finally:
            worker.stop()
            await asyncio.wait_for(task, 60)
            await container.close()
        assert done["processingStatus"] == "completed", done
        found = await client.post(
            "/kb/search",
            # Full text needs every word of the query; only the embedding can rank this passage.
            json={"kbId": kb["id"], "query": "How much holiday leave do employees get?", "topK": 3},
            headers=alice.headers,
        )
    results = found.json()["results"]
    assert "paid vacation" in results[0]["text"], results
