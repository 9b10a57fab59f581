"""An agent answers from a processed knowledge base: the passages reach the model's prompt, the
stream and the stored message (real search through `SearchKnowledgeBase` on Postgres)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from litestar.testing import AsyncTestClient

from entrypoints.http.app import create_app
from tests.ai_sdk import assert_accepted, run_ai_sdk_parser
from tests.fakes.chat import ScriptedChatModel, text_script
from tests.http.chat_support import (
    Holder,
    ScriptedModels,
    events,
    make_agent,
    settled,
    user_message,
)
from tests.http.helpers import make_kb
from tests.http.processing_support import HANDBOOK, EmbedderOverride, settle, upload


@pytest.fixture
async def both(
    settings, database, clean, registry
) -> AsyncIterator[tuple[AsyncTestClient, Holder]]:
    holder = Holder()
    app = create_app(settings, database, EmbedderOverride(registry), ScriptedModels(holder))
    async with AsyncTestClient(app=app) as client:
        yield client, holder


async def test_an_agent_cites_the_passages_it_was_given(both, alice, worker):
    client, holder = both
    kb = await make_kb(client, alice)
    await upload(client, alice, kb["id"], "handbook.md", "text/markdown", HANDBOOK.encode())
    async with worker():
        (done,) = await settle(client, alice, kb["id"])
    assert done["processingStatus"] == "completed"
    model = ScriptedChatModel(text_script("Thirty days."))
    holder.model = model
    agent = await make_agent(client, alice, knowledgeBaseIds=[kb["id"]])

    response = await client.post(
        "/chat",
        json={"agentId": agent["id"], "messages": user_message("How many holiday days?")},
        headers=alice.headers,
    )
    assert response.status_code == 200
    chunks = [c for c in events(response.content) if isinstance(c, dict)]
    sources = [c for c in chunks if c["type"] == "source-document"]
    assert sources and all(s["filename"] == "handbook.md" for s in sources)
    types = [c["type"] for c in chunks]
    assert types.index("text-end") < types.index("source-document") < types.index("finish-step")
    assert "thirty days of paid holiday" in model.requests[0].turns[0].content
    result = run_ai_sdk_parser(response.content)
    assert_accepted(result)
    assert [
        p["sourceId"] for p in result["message"]["parts"] if p["type"] == "source-document"
    ] == [s["sourceId"] for s in sources]
    saved = await settled(client, alice, response.headers["x-thread-id"])
    stored = [p for p in saved["messages"][-1]["parts"] if p["type"] == "source-document"]
    assert [p["sourceId"] for p in stored] == [s["sourceId"] for s in sources]
    # Where each cited passage lives, for the console to open its page or text.
    (listed,) = (
        await client.get("/kb/files", params={"kbId": kb["id"]}, headers=alice.headers)
    ).json()["files"]
    for part in [*sources, *stored]:
        assert part["providerMetadata"] == {
            "agentPlatform": {"kbId": kb["id"], "fileId": listed["fileId"], "pageNumber": 1}
        }
