"""`POST /mcp`: the platform as an MCP server, driven by the `mcp` SDK's own client over the
app in process: its tools, the caller's rights and organization, bad arguments."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from litestar.testing import AsyncTestClient
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.fakes.chat import text_script
from tests.http.chat_support import make_agent, script
from tests.http.helpers import make_kb
from tests.http.test_search_options import app_for, seeded


class ThroughTestClient(httpx2.AsyncBaseTransport):
    """The MCP client's requests sent through Litestar's test client, which runs the app in
    the loop its database pool belongs to."""

    def __init__(self, client: AsyncTestClient) -> None:
        self._client = client

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        response = await self._client.request(
            request.method,
            request.url.raw_path.decode(),
            headers=dict(request.headers),
            content=body,
        )
        return httpx2.Response(
            response.status_code,
            headers=list(response.headers.multi_items()),
            content=response.content,
        )


@asynccontextmanager
async def mcp_session(client: AsyncTestClient, headers: dict[str, str]) -> AsyncIterator[Any]:
    """An initialized MCP client session on the app `client` serves."""
    transport = ThroughTestClient(client)
    async with (
        httpx2.AsyncClient(
            transport=transport, base_url="http://testserver.local", headers=headers
        ) as http,
        streamable_http_client("http://testserver.local/mcp", http_client=http) as streams,
        ClientSession(*streams) as session,
    ):
        await session.initialize()
        yield session


def payload(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def refusal(result: Any) -> str:
    assert result.is_error
    return str(result.content[0].text)


async def test_the_tools_are_listed(client, alice):
    async with mcp_session(client, alice.headers) as session:
        listed = await session.list_tools()
    names = {tool.name for tool in listed.tools}
    assert names == {"search_knowledge_base", "list_agents", "ask_agent"}
    search = next(t for t in listed.tools if t.name == "search_knowledge_base")
    assert search.input_schema["required"] == ["query"]


async def test_without_a_token_the_endpoint_refuses(client):
    response = await client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 401
    assert response.json() == {"error": "Unauthorized"}


async def test_list_agents_shows_the_callers_organization_only(client, alice, bob):
    mine = await make_agent(client, alice, name="Helper")
    async with mcp_session(client, alice.headers) as session:
        agents = payload(await session.call_tool("list_agents", {}))["agents"]
    assert [(a["id"], a["name"]) for a in agents] == [(mine["id"], "Helper")]
    async with mcp_session(client, bob.headers) as session:
        assert payload(await session.call_tool("list_agents", {})) == {"agents": []}


async def test_search_refuses_as_http_does(client, alice, bob):
    kb = await make_kb(client, alice)
    async with mcp_session(client, bob.headers) as session:
        refused = refusal(
            await session.call_tool("search_knowledge_base", {"query": "x", "kbIds": [kb["id"]]})
        )
    over_http = await client.post(
        "/kb/search", json={"query": "x", "kbIds": [kb["id"]]}, headers=bob.headers
    )
    assert over_http.status_code == 404
    assert refused == over_http.json()["error"]
    async with mcp_session(client, alice.headers) as session:
        empty = refusal(await session.call_tool("search_knowledge_base", {"query": "  "}))
        assert empty
        found = payload(await session.call_tool("search_knowledge_base", {"query": "leave"}))
    assert found == {"results": []}


async def test_ask_agent_answers_when_the_run_ends(chat, alice, bob, holder):
    script(holder, text_script("Twenty-five ", "days."))
    agent = await make_agent(chat, alice)
    async with mcp_session(chat, alice.headers) as session:
        answer = payload(
            await session.call_tool(
                "ask_agent", {"agentId": agent["id"], "message": "How much leave?"}
            )
        )
    assert answer["answer"] == "Twenty-five days."
    saved = await chat.get(f"/getConversation?threadId={answer['threadId']}", headers=alice.headers)
    assert saved.json()["streamStatus"] == "completed"
    async with mcp_session(chat, bob.headers) as session:
        refused = refusal(
            await session.call_tool("ask_agent", {"agentId": agent["id"], "message": "Hi"})
        )
    assert refused == "Agent not found"


async def test_an_unknown_tool_is_an_error_result(client, alice):
    async with mcp_session(client, alice.headers) as session:
        assert "no tool named" in refusal(await session.call_tool("delete_everything", {}))


async def test_search_answers_what_the_http_search_answers(
    settings, database, registry, clean, alice, worker
):
    app = app_for(settings, database, registry)
    async with AsyncTestClient(app=app) as client:
        client.ap_app = app  # type: ignore[attr-defined]
        kb = await seeded(client, alice, worker)
        body = {"kbIds": [kb], "query": "Which flow is measured?", "topK": 3}
        over_http = await client.post("/kb/search", json=body, headers=alice.headers)
        async with mcp_session(client, alice.headers) as session:
            found = payload(await session.call_tool("search_knowledge_base", body))
            latest = payload(
                await session.call_tool("search_knowledge_base", {"query": body["query"]})
            )
    assert found["results"] and found["results"] == over_http.json()["results"]
    # Without kbIds, the organization's newest knowledge bases: here the one.
    assert [r["chunkId"] for r in latest["results"][:3]] == [r["chunkId"] for r in found["results"]]
