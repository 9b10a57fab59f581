"""Agents' `tools` and tool servers' tools in chat, through the whole app: the field's rules on
`/agents`, then a scripted tool-calling model that calls an MCP tool (and a failing one) as
`<server>__<tool>`, with a scripted `ToolConnector` in place of the network."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from application.ports.chat_model import Finished, ToolCall, ToolCallRequested
from application.ports.tool_connector import ToolOutput, ToolServerUnreachable
from entrypoints.http.app import create_app
from tests.ai_sdk import assert_accepted, run_ai_sdk_parser
from tests.fakes.chat import ScriptedChatModel, text_script
from tests.fakes.tool_servers import FakeToolConnector, tool
from tests.http.chat_support import (
    Holder,
    ScriptedModels,
    events,
    make_agent,
    settled,
    user_message,
)
from tests.http.conftest import forget_members
from tests.http.tool_support import ToolConnectorOverride

URL = "http://127.0.0.1:9/mcp"
SECRET = "Bearer s3cret-value"
NAMES = "tools[0].names"
IMAGE = "data:image/png;base64," + "A" * 4000
FOUND = [
    {"type": "text", "text": "Ada Lovelace, ada@example.test"},
    {"type": "image", "mediaType": "image/png", "url": IMAGE},
]
BAD_NAMES = f"{NAMES} must hold tool names of 1 to 128 characters"


@pytest.fixture(scope="module")
def connector() -> FakeToolConnector:
    return FakeToolConnector()


@pytest.fixture(scope="module")
def tool_holder() -> Holder:
    return Holder()


@pytest.fixture(scope="module")
async def tools_session(
    settings, database, tool_holder, connector
) -> AsyncIterator[AsyncTestClient]:
    app = create_app(
        settings, database, ScriptedModels(tool_holder), ToolConnectorOverride(connector)
    )
    async with AsyncTestClient(app=app) as client:
        client.ap_app = app  # type: ignore[attr-defined]
        yield client


@pytest.fixture
async def app(tools_session, clean, tool_holder, connector) -> AsyncTestClient:
    await forget_members(tools_session)
    tool_holder.model = ScriptedChatModel()
    connector.__init__()  # type: ignore[misc]
    return tools_session


async def a_server(client, who, name: str = "crm", **body: Any) -> dict[str, Any]:
    payload = {"name": name, "kind": "mcp", "url": URL, "headers": {"Authorization": SECRET}}
    response = await client.post("/tools", json={**payload, **body}, headers=who.headers)
    assert response.status_code == 201, response.text
    return response.json()["toolServer"]


def call(call_id: str, name: str, **arguments: Any) -> list[object]:
    return [
        ToolCallRequested(ToolCall(id=call_id, name=name, arguments=arguments)),
        Finished("tool_calls"),
    ]


# The field


async def test_an_agent_takes_tools_and_shows_them(app, alice, connector):
    connector.tools[URL] = [tool("find_contact"), tool("add_note")]
    server = await a_server(app, alice)
    plain = await make_agent(app, alice)
    assert plain["tools"] == []

    grants = [{"toolServerId": server["id"], "names": ["find_contact"]}]
    agent = await make_agent(app, alice, tools=grants)
    assert agent["tools"] == grants
    read = await app.get("/agents", params={"agentId": agent["id"]}, headers=alice.headers)
    assert read.json()["agent"]["tools"] == grants

    every = [{"toolServerId": server["id"], "names": None}]
    changed = await app.patch(
        "/agents", json={"agentId": agent["id"], "tools": every}, headers=alice.headers
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["agent"]["tools"] == every
    renamed = await app.patch(
        "/agents", json={"agentId": agent["id"], "name": "Other"}, headers=alice.headers
    )
    assert renamed.json()["agent"]["tools"] == every

    deleted = await app.delete(
        "/tools", params={"toolServerId": server["id"]}, headers=alice.headers
    )
    assert deleted.status_code == 200, deleted.text
    read = await app.get("/agents", params={"agentId": agent["id"]}, headers=alice.headers)
    assert read.json()["agent"]["tools"] == []


@pytest.mark.parametrize(
    ("tools", "error"),
    [
        ("all", "tools must be a list of {toolServerId, names} objects"),
        ([3], "tools must be a list of {toolServerId, names} objects"),
        ([{"names": None}], "Valid tool server ID is required"),
        ([{"toolServerId": "1"}], "Valid tool server ID is required"),
        ([{"toolServerId": 1}, {"toolServerId": 1}], "tools names tool server 1 more than once"),
        ([{"toolServerId": 1, "names": [""]}], BAD_NAMES),
        ([{"toolServerId": 1, "names": "x"}], f"{NAMES} must be null or a list of tool names"),
    ],
)  # fmt: skip
async def test_bad_tools_are_400_with_their_message(app, alice, tools, error):
    response = await app.post("/agents", json={"name": "A", "tools": tools}, headers=alice.headers)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == error


async def test_unknown_and_foreign_tool_servers_are_400(app, alice, member):
    bob = member("org_b", "user_bob_admin", "admin")
    theirs = await a_server(app, bob)
    for server_id in (theirs["id"], 999):
        body = {"name": "A", "tools": [{"toolServerId": server_id, "names": None}]}
        response = await app.post("/agents", json=body, headers=alice.headers)
        assert response.status_code == 400, response.text
        assert response.json()["error"] == "Unknown tool server ids"
    agent = await make_agent(app, alice)
    response = await app.patch(
        "/agents",
        json={"agentId": agent["id"], "tools": [{"toolServerId": theirs["id"]}]},
        headers=alice.headers,
    )
    assert response.status_code == 400
    assert response.json()["error"] == "Unknown tool server ids"


# Chat


async def test_a_model_calls_an_mcp_tool_and_a_failing_one_and_the_answer_goes_on(
    app, alice, tool_holder, connector
):
    connector.tools[URL] = [
        tool("find_contact", "Find a contact by name.", who={"type": "string"}),
        tool("broken", "Always fails."),
        tool("hidden", "Not granted."),
    ]
    connector.results[(URL, "find_contact")] = ToolOutput(content=FOUND)
    connector.results[(URL, "broken")] = ToolServerUnreachable(
        "The tool server did not answer in time."
    )
    server = await a_server(app, alice)
    grants = [{"toolServerId": server["id"], "names": ["find_contact", "broken"]}]
    agent = await make_agent(app, alice, tools=grants)
    model = ScriptedChatModel(
        call("call_1", "crm__find_contact", who="Ada"),
        call("call_2", "crm__broken"),
        text_script("Ada's address is ada@example.test."),
        supports_tools=True,
    )
    tool_holder.model = model

    response = await app.post(
        "/chat", json={"agentId": agent["id"], "messages": user_message()}, headers=alice.headers
    )
    assert response.status_code == 200, response.text
    thread_id = response.headers["x-thread-id"]
    chunks = [c for c in events(response.content) if isinstance(c, dict)]
    tool_chunks = [c for c in chunks if c["type"].startswith("tool-")]
    assert [(c["type"], c["toolCallId"]) for c in tool_chunks] == [
        ("tool-input-start", "call_1"),
        ("tool-input-available", "call_1"),
        ("tool-output-available", "call_1"),
        ("tool-input-start", "call_2"),
        ("tool-input-available", "call_2"),
        ("tool-output-error", "call_2"),
    ]
    assert tool_chunks[0]["toolName"] == "crm__find_contact"
    assert tool_chunks[1]["input"] == {"who": "Ada"}
    found = {"content": FOUND}
    assert tool_chunks[2]["output"] == found
    assert tool_chunks[5]["errorText"] == "The tool server did not answer in time."
    assert chunks[-1] == {"type": "finish"}
    assert_accepted(run_ai_sdk_parser(response.content))

    offered = [spec.name for spec in model.requests[0].tools]
    assert "crm__find_contact" in offered and "crm__broken" in offered
    assert "crm__hidden" not in offered
    assert model.requests[0].tools[offered.index("crm__find_contact")].parameters == {
        "type": "object",
        "properties": {"who": {"type": "string"}},
    }
    # The model reads the image as a note, not its bytes.
    answered = next(t for t in model.requests[1].turns if t.role == "tool")
    assert "Ada Lovelace" in answered.content and IMAGE not in answered.content
    assert "[image/png of 4022 characters, not shown]" in answered.content
    endpoint, name, arguments = connector.calls[0]
    assert (endpoint.url, name, arguments) == (URL, "find_contact", {"who": "Ada"})
    assert endpoint.headers == {"Authorization": SECRET}

    saved = await settled(app, alice, thread_id)
    assert saved["streamStatus"] == "completed"
    parts = saved["messages"][-1]["parts"]
    assert [p["type"] for p in parts] == [
        "tool-invocation",
        "tool-result",
        "tool-invocation",
        "tool-result",
        "text",
    ]
    assert parts[1]["result"] == found
    assert parts[3]["isError"] is True
    assert parts[-1]["text"] == "Ada's address is ada@example.test."

    audit = await app.get("/admin/audit-log", headers=alice.headers)
    assert audit.status_code == 200, audit.text
    calls = [e for e in audit.json()["entries"] if e["action"] == "tool.called"]
    assert [(e["details"]["tool"], e["details"]["ok"]) for e in calls] == [
        ("broken", False),
        ("find_contact", True),
    ]
    assert calls[1]["details"]["threadId"] == thread_id
    assert calls[1]["details"]["agentId"] == agent["id"]
    assert "Ada" not in str(calls)


async def test_a_disabled_server_is_not_offered(app, alice, tool_holder, connector):
    connector.tools[URL] = [tool("find_contact")]
    server = await a_server(app, alice)
    agent = await make_agent(app, alice, tools=[{"toolServerId": server["id"]}])
    off = await app.patch(
        "/tools", json={"toolServerId": server["id"], "enabled": False}, headers=alice.headers
    )
    assert off.status_code == 200, off.text
    model = ScriptedChatModel(text_script("No tools."), supports_tools=True)
    tool_holder.model = model
    response = await app.post(
        "/chat", json={"agentId": agent["id"], "messages": user_message()}, headers=alice.headers
    )
    assert response.status_code == 200, response.text
    await settled(app, alice, response.headers["x-thread-id"])
    assert not any(spec.name.startswith("crm__") for spec in model.requests[0].tools)
