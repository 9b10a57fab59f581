"""Tool servers end to end with nothing faked but the chat model: a real MCP server (the `mcp`
SDK's) and a real OpenAPI service on loopback, registered over HTTP, reached by the service's
own connector (`HttpToolConnector`, loopback allowed by `AP_TOOL_ALLOWED_HOSTS`), called by a
scripted tool-calling model; the stream checked by the `ai` package's parser, the stored parts,
a timeout and a server that disappears."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from application.ports.chat_model import Finished, ToolCall, ToolCallRequested
from entrypoints.http.app import create_app
from entrypoints.tools_config import ToolSettings
from tests.ai_sdk import assert_accepted, run_ai_sdk_parser
from tests.fakes.chat import ScriptedChatModel, text_script
from tests.http.chat_support import Holder, ScriptedModels, events, make_agent, settled
from tests.http.chat_support import user_message as ask
from tests.http.conftest import forget_members
from tests.integration import tool_servers_support as support

TIMEOUT = 1.5  # below the test server's slow tool (5 s)


class Served:
    """An ASGI app served by uvicorn on 127.0.0.1 from a thread of its own, until `stop`."""

    def __init__(self, app: Any) -> None:
        self._stop = threading.Event()
        ready = threading.Event()
        urls: list[str] = []

        async def serve() -> None:
            async with support.serving(app) as url:
                urls.append(url)
                ready.set()
                await asyncio.to_thread(self._stop.wait)

        self._thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
        self._thread.start()
        assert ready.wait(30), "the test server did not start"
        self.url = urls[0]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[Served]:
    served = Served(support.mcp_app())
    yield served
    served.stop()


@pytest.fixture(scope="module")
def api_server() -> Iterator[Served]:
    served = Served(support.openapi_app())
    yield served
    served.stop()


@pytest.fixture(scope="module")
def holder() -> Holder:
    return Holder()


@pytest.fixture(scope="module")
async def real_session(settings, database, holder) -> AsyncIterator[AsyncTestClient]:
    tools = ToolSettings(allowed_hosts=("127.0.0.1",), timeout=TIMEOUT)
    app = create_app(dataclasses.replace(settings, tools=tools), database, ScriptedModels(holder))
    async with AsyncTestClient(app=app) as client:
        client.ap_app = app  # type: ignore[attr-defined]
        yield client


@pytest.fixture
async def app(real_session, clean) -> AsyncTestClient:
    await forget_members(real_session)
    return real_session


def call(call_id: str, name: str, **arguments: Any) -> list[object]:
    return [
        ToolCallRequested(ToolCall(id=call_id, name=name, arguments=arguments)),
        Finished("tool_calls"),
    ]


async def register(client, who, name: str, kind: str, url: str) -> dict[str, Any]:
    body = {"name": name, "kind": kind, "url": url, "headers": {"X-Api-Key": "k-123"}}
    response = await client.post("/tools", json=body, headers=who.headers)
    assert response.status_code == 201, response.text
    return response.json()["toolServer"]


async def answer(client, who, holder, agent, *steps: list[object]) -> tuple[list[Any], str]:
    holder.model = ScriptedChatModel(*steps, supports_tools=True)
    response = await client.post(
        "/chat", json={"agentId": agent["id"], "messages": ask()}, headers=who.headers
    )
    assert response.status_code == 200, response.text
    assert_accepted(run_ai_sdk_parser(response.content))
    return [c for c in events(response.content) if isinstance(c, dict)], response.headers[
        "x-thread-id"
    ]


async def test_registered_servers_are_called_and_their_results_streamed_and_kept(
    app, alice, holder, mcp_server, api_server
):
    mcp = await register(app, alice, "kit", "mcp", f"{mcp_server.url}/mcp")
    assert mcp["status"] == "ready", mcp["error"]
    # Every page of the server's tools/list (pages of 5).
    assert len(mcp["tools"]) == len(support.TOOLS)
    api = await register(app, alice, "pets", "openapi", f"{api_server.url}/schema/openapi.json")
    assert api["status"] == "ready", api["error"]
    grants = [
        {"toolServerId": mcp["id"], "names": ["echo", "image", "fail", "slow"]},
        {"toolServerId": api["id"], "names": None},
    ]
    agent = await make_agent(app, alice, tools=grants)
    assert {"getPet", "searchPets", "createPet"} <= {t["name"] for t in api["tools"]}

    chunks, thread_id = await answer(
        app, alice, holder, agent,
        call("c1", "kit__echo", text="hello"),
        call("c2", "kit__image"),
        call("c3", "pets__getPet", pet_id=7),
        call("c4", "kit__fail"),
        text_script("Done."),
    )  # fmt: skip
    outputs = {
        c["toolCallId"]: c
        for c in chunks
        if c["type"] in ("tool-output-available", "tool-output-error")
    }
    assert outputs["c1"]["output"]["content"] == [{"type": "text", "text": "hello"}]
    image = outputs["c2"]["output"]["content"][0]
    assert image["type"] == "image" and image["url"].startswith("data:image/png;base64,")
    assert outputs["c3"]["type"] == "tool-output-available"
    assert outputs["c3"]["output"]["structured"]["id"] == 7
    assert outputs["c4"]["type"] == "tool-output-error"
    # The server's own words for its failure (the SDK's server reports a raising tool so).
    assert "the tool broke" in outputs["c4"]["errorText"]
    assert chunks[-1] == {"type": "finish"}

    saved = await settled(app, alice, thread_id)
    assert saved["streamStatus"] == "completed"
    parts = saved["messages"][-1]["parts"]
    results = [p for p in parts if p["type"] == "tool-result"]
    assert [p["toolCallId"] for p in results] == ["c1", "c2", "c3", "c4"]
    assert results[1]["result"]["content"][0]["url"] == image["url"]
    assert parts[-1] == {"type": "text", "text": "Done."}


async def test_a_slow_tool_times_out_and_a_vanished_server_fails_the_call_only(
    app, alice, holder, mcp_server
):
    doomed = Served(support.mcp_app())
    slow = await register(app, alice, "kit", "mcp", f"{mcp_server.url}/mcp")
    gone = await register(app, alice, "gone", "mcp", f"{doomed.url}/mcp")
    assert gone["status"] == "ready", gone["error"]
    doomed.stop()
    agent = await make_agent(
        app, alice,
        tools=[{"toolServerId": slow["id"], "names": ["slow"]},
               {"toolServerId": gone["id"], "names": ["echo"]}],
    )  # fmt: skip
    chunks, thread_id = await answer(
        app, alice, holder, agent,
        call("c1", "kit__slow"), call("c2", "gone__echo", text="hi"), text_script("Sorry."),
    )  # fmt: skip
    errors = {c["toolCallId"]: c["errorText"] for c in chunks if c["type"] == "tool-output-error"}
    assert set(errors) == {"c1", "c2"}
    assert "did not answer" in errors["c1"] or "time" in errors["c1"]
    texts = "".join(c["delta"] for c in chunks if c["type"] == "text-delta")
    assert texts == "Sorry."
    assert (await settled(app, alice, thread_id))["streamStatus"] == "completed"
