"""Skills in chat, through the whole app: a scripted tool-calling model loads a skill and reads
one of its bundled files; a soft-deleted skill is no longer offered nor loadable; a model
without tools gets the matching SKILL.md in its instructions."""

from __future__ import annotations

import base64

from application.ports.chat_model import Finished, ToolCall, ToolCallRequested
from tests.fakes.chat import ScriptedChatModel, text_script
from tests.http.chat_support import make_agent, settled, start_polled

GUIDE = "# Guide\n\nAlways quote the page number.\n"
SKILL_MD = (
    "---\nname: pdf-tools\ndescription: Answer questions about PDF reports and invoices.\n---\n"
    "# PDF tools\n\nRead references/guide.md before answering.\n"
)


def call(tool: str, **arguments: str) -> list[object]:
    return [
        ToolCallRequested(ToolCall(id=f"call_{tool}", name=tool, arguments=arguments)),
        Finished("tool_calls"),
    ]


async def a_skill(client, who) -> int:
    created = await client.post("/skills/manage", json={"skillMd": SKILL_MD}, headers=who.headers)
    assert created.status_code == 201, created.text
    sid = created.json()["skill"]["id"]
    added = await client.post(
        "/skills/files",
        json={
            "skillId": sid,
            "path": "references/guide.md",
            "content": base64.b64encode(GUIDE.encode()).decode(),
        },
        headers=who.headers,
    )
    assert added.status_code == 201, added.text
    return int(sid)


def results(conversation: dict) -> dict[str, object]:
    parts = conversation["messages"][-1]["parts"]
    return {p["toolName"]: p["result"] for p in parts if p["type"] == "tool-result"}


async def test_a_model_loads_a_skill_and_reads_its_file(chat, alice, holder):
    sid = await a_skill(chat, alice)
    agent = await make_agent(chat, alice, skillIds=[sid])
    model = ScriptedChatModel(
        call("load_skill", name="pdf-tools"),
        call("read_skill_file", name="pdf-tools", path="references/guide.md"),
        text_script("Quoting page 3."),
        supports_tools=True,
    )
    holder.model = model
    thread_id = await start_polled(chat, alice, agent)
    body = await settled(chat, alice, thread_id)
    assert body["streamStatus"] == "completed"
    found = results(body)
    assert found["load_skill"]["name"] == "pdf-tools"
    assert "Read references/guide.md before answering." in found["load_skill"]["instructions"]
    assert found["load_skill"]["files"] == ["references/guide.md"]
    assert found["read_skill_file"]["text"] == GUIDE
    offered = {tool.name: tool for tool in model.requests[0].tools}
    assert offered["load_skill"].parameters["properties"]["name"]["enum"] == ["pdf-tools"]
    assert "read_skill_file" in offered
    system = model.requests[0].turns[0].content
    assert "pdf-tools" in system and "Answer questions about PDF reports" in system
    # The skill's instructions reach the model as the tool's result, never as the member's turn.
    assert all(
        t.role != "user" or "Read references" not in t.content for t in model.requests[2].turns
    )


async def test_a_deleted_skill_is_neither_offered_nor_loaded(chat, alice, holder):
    sid = await a_skill(chat, alice)
    agent = await make_agent(chat, alice, skillIds=[sid])
    deleted = await chat.delete(f"/skills/manage?skillId={sid}", headers=alice.headers)
    assert deleted.status_code == 200
    model = ScriptedChatModel(
        call("load_skill", name="pdf-tools"), text_script("Without it."), supports_tools=True
    )
    holder.model = model
    thread_id = await start_polled(chat, alice, agent)
    body = await settled(chat, alice, thread_id)
    assert body["streamStatus"] == "completed"
    assert "load_skill" not in {tool.name for tool in model.requests[0].tools}
    parts = body["messages"][-1]["parts"]
    refused = [p for p in parts if p["type"] == "tool-result"]
    assert refused and refused[0]["isError"] is True
    assert "pdf-tools" not in model.requests[0].turns[0].content


async def test_a_model_without_tools_gets_the_matching_skill_in_its_instructions(
    chat, alice, holder
):
    sid = await a_skill(chat, alice)
    agent = await make_agent(chat, alice, skillIds=[sid])
    model = ScriptedChatModel(text_script("Sure."), supports_tools=False)
    holder.model = model
    response = await chat.post(
        "/chat",
        json={
            "agentId": agent["id"],
            "messages": [
                {"role": "user", "parts": [{"type": "text", "text": "Summarise this PDF report"}]}
            ],
        },
        headers={**alice.headers, "X-Stream-Response": "false"},
    )
    assert response.status_code == 202
    await settled(chat, alice, response.headers["x-thread-id"])
    request = model.requests[0]
    assert not request.tools
    assert "Read references/guide.md before answering." in request.turns[0].content
