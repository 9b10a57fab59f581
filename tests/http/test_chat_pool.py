"""An answer being streamed holds no pooled connection: its use case ran in a short scope of
its own, so with a pool of one connection other requests are served while it streams."""

from __future__ import annotations

import asyncio
import dataclasses

import httpx

from entrypoints.http.app import create_app
from tests.fakes.chat import ScriptedChatModel, text_script
from tests.http.chat_support import Holder, ScriptedModels, events, make_agent, user_message

STREAMING = 3.0


async def test_a_streaming_answer_leaves_the_pool_to_other_requests(
    settings, database, clean, alice
):
    holder = Holder()
    one_connection = dataclasses.replace(settings, database_pool_size=1)
    app = create_app(one_connection, database, ScriptedModels(holder))
    # httpx's own ASGI transport runs requests side by side on this event loop (Litestar's test
    # client runs one at a time through a portal).
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver.local") as client:
        agent = await make_agent(client, alice)
        first, *rest = text_script("Still", " thinking.")
        holder.model = ScriptedChatModel([first, STREAMING, *rest])
        body = {"agentId": agent["id"], "messages": user_message()}
        answer = asyncio.create_task(client.post("/chat", json=body, headers=alice.headers))
        await asyncio.sleep(0.5)
        assert not answer.done()

        started = asyncio.get_running_loop().time()
        listed = await asyncio.wait_for(client.get("/agents", headers=alice.headers), 2.0)
        assert listed.status_code == 200
        assert asyncio.get_running_loop().time() - started < STREAMING / 2
        assert not answer.done(), "the answer should still be streaming"

        streamed = await answer
        assert streamed.status_code == 200
        chunks = [e for e in events(streamed.content) if isinstance(e, dict)]
        deltas = [e["delta"] for e in chunks if e["type"] == "text-delta"]
        assert "".join(deltas) == "Still thinking."
    await app.app.state.dishka_container.close()  # type: ignore[attr-defined]
