"""An agent's `knowledgeFilters` end to end: stored and echoed as sent, refused with the
filter parser's message, cleared with null, documented as the parser reads it, and applied to
every search a chat with the agent makes (real search on Postgres)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from litestar.testing import AsyncTestClient

from application.ports.chat_model import Finished, ToolCall, ToolCallRequested
from entrypoints.http.app import create_app
from tests.fakes.chat import ScriptedChatModel, text_script
from tests.http.chat_support import Holder, ScriptedModels, events, make_agent, user_message
from tests.http.helpers import association, make_kb, put_upload
from tests.http.processing_support import EmbedderOverride, settle

TEAM_HR = {"key": "team", "op": "eq", "value": "hr"}
NESTED = {
    "and": [
        TEAM_HR,
        {
            "or": [
                {"key": "fileSize", "op": "lte", "value": 1_000_000},
                {"key": "createdAt", "op": "gte", "value": "2026-01-01T00:00:00+00:00"},
            ]
        },
        {"key": "userMetadata.fileName", "op": "nin", "value": ["draft", 3, True]},
        {"key": "contentType", "op": "ne", "value": "application/pdf"},
    ]
}


def nested(depth: int) -> dict[str, Any]:
    """`TEAM_HR` inside `depth - 1` groups: `depth` deep."""
    node: dict[str, Any] = TEAM_HR
    for _ in range(depth - 1):
        node = {"and": [node]}
    return node


INVALID = [
    pytest.param(
        {"key": "team", "op": "like", "value": "hr"},
        "unknown operator 'like': one of eq, ne, gt, gte, lt, lte, in, nin",
        id="unknown-operator",
    ),
    pytest.param(nested(6), "nested more than 5 deep", id="six-deep"),
    pytest.param({"or": [TEAM_HR] * 51}, "more than 50 conditions", id="51-conditions"),
    pytest.param(
        {"key": "fileSize", "op": "gt", "value": "large"},
        "fileSize compares with a number",
        id="file-size-string",
    ),
    pytest.param("team = hr", "each filter is an object", id="not-an-object"),
    pytest.param({"and": []}, '"and" takes a non-empty list of filters', id="empty-group"),
    pytest.param(
        {"key": "te\u0000am", "op": "eq", "value": "hr"},
        "a key holds no NUL character",
        id="nul-in-key",
    ),
]


async def read_agent(client, who, agent_id: int) -> dict[str, Any]:
    response = await client.get("/agents", params={"agentId": agent_id}, headers=who.headers)
    assert response.status_code == 200, response.text
    return response.json()["agent"]


async def test_filters_are_stored_and_echoed_as_sent(client, alice):
    agent = await make_agent(client, alice, knowledgeFilters=NESTED)
    assert agent["knowledgeFilters"] == NESTED
    assert (await read_agent(client, alice, agent["id"]))["knowledgeFilters"] == NESTED
    unlimited = await make_agent(client, alice, name="Everything")
    assert unlimited["knowledgeFilters"] is None
    listed = (await client.get("/agents", headers=alice.headers)).json()["agents"]
    assert {a["name"]: a["knowledgeFilters"] for a in listed} == {
        "Helper": NESTED,
        "Everything": None,
    }


async def test_the_limits_themselves_are_accepted(client, alice):
    five_deep = await make_agent(client, alice, knowledgeFilters=nested(5))
    assert five_deep["knowledgeFilters"] == nested(5)
    fifty = {"or": [TEAM_HR] * 50}
    assert (await make_agent(client, alice, knowledgeFilters=fifty))["knowledgeFilters"] == fifty


@pytest.mark.parametrize(("filters", "why"), INVALID)
async def test_invalid_filters_are_400_with_the_parsers_message(client, alice, filters, why):
    agent = await make_agent(client, alice, knowledgeFilters=TEAM_HR)
    created = await client.post(
        "/agents", json={"name": "Helper", "knowledgeFilters": filters}, headers=alice.headers
    )
    patched = await client.patch(
        "/agents",
        json={"agentId": agent["id"], "knowledgeFilters": filters},
        headers=alice.headers,
    )
    for response in (created, patched):
        assert response.status_code == 400, response.text
        assert response.json() == {
            "error": f"filters are invalid: {why}",
            "details": [{"field": "knowledgeFilters", "message": why}],
        }
    assert (await read_agent(client, alice, agent["id"]))["knowledgeFilters"] == TEAM_HR
    listed = (await client.get("/agents", headers=alice.headers)).json()["agents"]
    assert [a["id"] for a in listed] == [agent["id"]]


async def test_null_clears_the_filters_and_a_change_without_them_keeps_them(client, alice):
    agent = await make_agent(client, alice, knowledgeFilters=TEAM_HR)
    renamed = await client.patch(
        "/agents", json={"agentId": agent["id"], "name": "Renamed"}, headers=alice.headers
    )
    assert renamed.status_code == 200 and renamed.json()["agent"]["knowledgeFilters"] == TEAM_HR
    replaced = await client.patch(
        "/agents", json={"agentId": agent["id"], "knowledgeFilters": NESTED}, headers=alice.headers
    )
    assert replaced.json()["agent"]["knowledgeFilters"] == NESTED
    cleared = await client.patch(
        "/agents", json={"agentId": agent["id"], "knowledgeFilters": None}, headers=alice.headers
    )
    assert cleared.status_code == 200 and cleared.json()["agent"]["knowledgeFilters"] is None
    assert (await read_agent(client, alice, agent["id"]))["knowledgeFilters"] is None


async def test_the_document_states_the_parsers_rules(session_client):
    document = (await session_client.get("/schema/openapi.json")).json()
    schemas = document["components"]["schemas"]
    for body in ("CreateAgentBody", "UpdateAgentBody"):
        (schema,) = (v for k, v in schemas.items() if k.endswith(body))
        field = schema["properties"]["knowledgeFilters"]
        validator = Draft202012Validator(field)
        assert validator.is_valid(None) and validator.is_valid(NESTED)
        assert validator.is_valid(nested(5)) and validator.is_valid(TEAM_HR)
        assert "50 conditions" in str(field)
        # All but the count of conditions, which no keyword states.
        for case in INVALID:
            filters, why = case.values
            assert validator.is_valid(filters) == (why == "more than 50 conditions"), case.id
    (out,) = (v for k, v in schemas.items() if k.endswith("AgentOut"))
    assert "knowledgeFilters" in out["required"]


# The chat


HR = "# Holidays\n\nEveryone in human resources gets thirty days of paid holiday every year.\n"
OPS = "# Holidays\n\nEveryone in operations gets forty days of paid holiday every year.\n"


@pytest.fixture
async def both(
    settings, database, clean, registry
) -> AsyncIterator[tuple[AsyncTestClient, Holder]]:
    holder = Holder()
    app = create_app(settings, database, EmbedderOverride(registry), ScriptedModels(holder))
    async with AsyncTestClient(app=app) as client:
        yield client, holder


async def add_text(client, who, kb_id: int, name: str, text: str, metadata: dict) -> None:
    data = text.encode()
    presigned = (
        await client.post(
            "/upload/presigned",
            json={"fileName": name, "contentType": "text/markdown", "fileSize": len(data)},
            headers=who.headers,
        )
    ).json()
    assert (await put_upload(client, presigned, data)).status_code == 200
    body = association(kb_id, presigned, fileName=name, fileSize=len(data), userMetadata=metadata)
    created = await client.post("/kb/files", json=body, headers=who.headers)
    assert created.status_code == 201, created.text


async def ask(client, who, agent: dict, holder: Holder) -> tuple[list[str], list[str]]:
    """The agent searches through its tool with a query about the operations file, then
    answers: the file names it cited, and what it read (its prompt, then the tool's result)."""
    call = ToolCall(id="call_1", name="search_knowledge_base", arguments={"query": "operations"})
    holder.model = ScriptedChatModel(
        [ToolCallRequested(call), Finished("tool-calls")],
        text_script("Thirty days."),
        supports_tools=True,
    )
    response = await client.post(
        "/chat",
        json={"agentId": agent["id"], "messages": user_message("How many holiday days?")},
        headers=who.headers,
    )
    assert response.status_code == 200, response.text
    chunks = [c for c in events(response.content) if isinstance(c, dict)]
    cited = [c["filename"] for c in chunks if c["type"] == "source-document"]
    first, second = holder.model.requests
    tool_turn = second.turns[-1]
    assert tool_turn.role == "tool"
    return cited, [first.turns[0].content, tool_turn.content]


async def test_a_chat_reads_only_the_files_the_filters_let_through(both, alice, worker):
    client, holder = both
    kb = await make_kb(client, alice)
    await add_text(client, alice, kb["id"], "hr.md", HR, {"team": "hr"})
    await add_text(client, alice, kb["id"], "ops.md", OPS, {"team": "ops"})
    async with worker():
        files = await settle(client, alice, kb["id"], count=2)
    assert [f["processingStatus"] for f in files] == ["completed", "completed"]

    limited = await make_agent(client, alice, knowledgeBaseIds=[kb["id"]], knowledgeFilters=TEAM_HR)
    cited, (prompt, tool_result) = await ask(client, alice, limited, holder)
    assert cited and set(cited) == {"hr.md"}
    for read in (prompt, tool_result):
        assert "thirty days" in read and "forty days" not in read and "ops.md" not in read

    # The same knowledge base without the filters: both files are found.
    everything = await make_agent(client, alice, name="All", knowledgeBaseIds=[kb["id"]])
    cited, (prompt, tool_result) = await ask(client, alice, everything, holder)
    assert set(cited) == {"hr.md", "ops.md"}
    assert "forty days" in prompt and "forty days" in tool_result
