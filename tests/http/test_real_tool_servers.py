"""Tool servers end to end with nothing faked but the chat model: a real MCP server (the `mcp`
SDK's) and a real OpenAPI service on loopback, registered over HTTP, reached by the service's
own connector (`HttpToolConnector`, loopback allowed by `AP_TOOL_ALLOWED_HOSTS`), called by a
scripted tool-calling model; the stream checked by the `ai` package's parser, the stored parts,
a timeout and a server that disappears."""

from __future__ import annotations

import dataclasses
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


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[support.Served]:
    served = support.Served(support.mcp_app())
    yield served
    served.stop()


@pytest.fixture(scope="module")
def api_server() -> Iterator[support.Served]:
    served = support.Served(support.openapi_app())
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
    doomed = support.Served(support.mcp_app())
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


async def paused_answer(client, who, holder, mcp_server) -> tuple[list[Any], str, dict]:
    """An answer whose call of `kit__echo` (approval required) paused it, checked by the
    `ai` package's parser; the chunks, the thread and the message the parser assembled."""
    server = await register(client, who, "kit", "mcp", f"{mcp_server.url}/mcp")
    response = await client.patch(
        "/tools",
        json={"toolServerId": server["id"], "requireApproval": ["echo"]},
        headers=who.headers,
    )
    assert response.status_code == 200, response.text
    agent = await make_agent(client, who, tools=[{"toolServerId": server["id"], "names": None}])
    # The continuation's model call waits a moment, so that its stream can be followed live.
    holder.model = ScriptedChatModel(
        call("c1", "kit__echo", text="hello"), [1.0, *text_script("Sent.")], supports_tools=True
    )
    response = await client.post(
        "/chat", json={"agentId": agent["id"], "messages": ask()}, headers=who.headers
    )
    assert response.status_code == 200, response.text
    parsed = run_ai_sdk_parser(response.content)
    assert_accepted(parsed)
    chunks = [c for c in events(response.content) if isinstance(c, dict)]
    return chunks, response.headers["x-thread-id"], parsed["message"]


async def decide(client, who, thread_id: str, **body: Any):
    return await client.post(f"/chat/{thread_id}/approvals", json=body, headers=who.headers)


async def test_a_call_needing_approval_waits_for_it_and_continues_in_the_same_message(
    app, alice, member, holder, mcp_server
):
    chunks, thread_id, message = await paused_answer(app, alice, holder, mcp_server)
    request = next(c for c in chunks if c["type"] == "tool-approval-request")
    assert request["toolCallId"] == "c1"
    assert [c["type"] for c in chunks[-3:]] == ["tool-approval-request", "finish-step", "finish"]
    (part,) = [p for p in message["parts"] if p.get("toolCallId") == "c1"]
    assert part["state"] == "approval-requested"
    paused = await settled(app, alice, thread_id)
    assert paused["streamStatus"] == "awaiting_approval"
    stored = paused["messages"][-1]["parts"]
    assert [p["type"] for p in stored] == ["tool-invocation", "tool-approval-request"]

    approval = request["approvalId"]
    carol = member("org_a", "user_carol")
    for who, body, status in [
        (carol, {"approvalId": approval, "approved": True}, 404),
        (alice, {"approvalId": "00000000-0000-4000-8000-000000000000", "approved": True}, 404),
        (alice, {"approvalId": approval}, 400),
        (alice, {"approvalId": approval, "approved": "yes"}, 400),
    ]:
        response = await decide(app, who, thread_id, **body)
        assert response.status_code == status, response.text
    response = await decide(app, alice, thread_id, approvalId=approval, approved=True)
    assert response.status_code == 200, response.text
    assert response.json() == {"success": True, "threadId": thread_id, "continued": True}
    again = await decide(app, alice, thread_id, approvalId=approval, approved=False)
    assert again.status_code == 409, again.text

    followed = await app.get(f"/chat/{thread_id}/stream", headers=alice.headers)
    assert followed.status_code == 200, followed.text
    parsed = run_ai_sdk_parser(followed.content, message=message)
    assert_accepted(parsed)
    resumed = [c for c in events(followed.content) if isinstance(c, dict)]
    assert resumed[0] == {"type": "start", "messageId": message["id"]}
    assert resumed[1] == {
        "type": "tool-approval-response",
        "approvalId": approval,
        "approved": True,
    }
    assert resumed[2]["type"] == "tool-output-available"
    assert resumed[2]["output"]["content"] == [{"type": "text", "text": "hello"}]
    (part,) = [p for p in parsed["message"]["parts"] if p.get("toolCallId") == "c1"]
    assert part["state"] == "output-available"
    assert parsed["message"]["parts"][-1] == {"type": "text", "text": "Sent.", "state": "done"}

    done = await settled(app, alice, thread_id)
    assert done["streamStatus"] == "completed" and len(done["messages"]) == 2
    kinds = [p["type"] for p in done["messages"][-1]["parts"]]
    assert kinds == [
        "tool-invocation", "tool-approval-request", "tool-approval-response", "tool-result", "text"
    ]  # fmt: skip
    audit = await app.get("/admin/audit-log", headers=alice.headers)
    actions = [entry["action"] for entry in audit.json()["entries"]]
    assert "tool.approved" in actions and "tool.called" in actions


async def test_a_denied_call_is_not_made_and_the_answer_says_so(app, alice, holder, mcp_server):
    chunks, thread_id, message = await paused_answer(app, alice, holder, mcp_server)
    approval = next(c for c in chunks if c["type"] == "tool-approval-request")["approvalId"]
    response = await decide(
        app, alice, thread_id, approvalId=approval, approved=False, reason="Not now"
    )
    assert response.status_code == 200, response.text
    followed = await app.get(f"/chat/{thread_id}/stream", headers=alice.headers)
    parsed = run_ai_sdk_parser(followed.content, message=message)
    assert_accepted(parsed)
    resumed = [c for c in events(followed.content) if isinstance(c, dict)]
    assert resumed[2] == {"type": "tool-output-denied", "toolCallId": "c1"}
    (part,) = [p for p in parsed["message"]["parts"] if p.get("toolCallId") == "c1"]
    assert part["state"] == "output-denied"
    done = await settled(app, alice, thread_id)
    denied = next(p for p in done["messages"][-1]["parts"] if p["type"] == "tool-result")
    assert denied["denied"] is True and "Not now" in denied["result"]
    tool_turn = holder.model.requests[-1].turns[-1]
    assert tool_turn.role == "tool" and "did not approve" in tool_turn.content
