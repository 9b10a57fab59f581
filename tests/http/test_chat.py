"""`POST /chat`, resume and cancel, through the whole app with a scripted chat model."""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from application.ports.chat_model import ChatModelError, TextDelta
from entrypoints.http.app import create_app
from tests.ai_sdk import assert_accepted, run_ai_sdk_parser
from tests.fakes.chat import text_script
from tests.http.chat_support import (
    Holder,
    ScriptedModels,
    conversation,
    events,
    make_agent,
    script,
    settled,
    start_polled,
    user_message,
)


async def test_a_streamed_answer_follows_the_protocol_and_is_saved(chat, alice, holder):
    script(holder, text_script("Twenty-five ", "days ", "a year."))
    agent = await make_agent(chat, alice)
    response = await chat.post(
        "/chat", json={"agentId": agent["id"], "messages": user_message()}, headers=alice.headers
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    thread_id = response.headers["x-thread-id"]
    assert str(uuid.UUID(thread_id)) == thread_id
    chunks = events(response.content)
    assert chunks[-1] == "[DONE]"
    # The deltas that came together reach the reader merged (one or more text-delta chunks).
    types = [c["type"] for c in chunks[:-1]]
    assert [t for i, t in enumerate(types) if t != "text-delta" or types[i - 1] != t] == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    deltas = "".join(c["delta"] for c in chunks[:-1] if c["type"] == "text-delta")
    assert deltas == "Twenty-five days a year."
    result = run_ai_sdk_parser(response.content)
    assert_accepted(result)
    assert result["message"]["role"] == "assistant"
    texts = [p["text"] for p in result["message"]["parts"] if p["type"] == "text"]
    assert texts == ["Twenty-five days a year."]

    saved = await settled(chat, alice, thread_id)
    assert saved["streamStatus"] == "completed"
    assert saved["agentId"] == agent["id"]
    assert saved["title"] == "What is our leave policy?"
    assert [(m["role"], m["parts"]) for m in saved["messages"]] == [
        ("user", [{"type": "text", "text": "What is our leave policy?"}]),
        ("assistant", [{"type": "text", "text": "Twenty-five days a year."}]),
    ]
    assert saved["messages"][1]["id"] == chunks[0]["messageId"]


async def test_the_polling_mode_answers_202_and_the_conversation_completes(chat, alice, holder):
    script(holder, [TextDelta("Slow "), 0.2, TextDelta("answer.")])
    agent = await make_agent(chat, alice)
    response = await chat.post(
        "/chat",
        json={"agentId": agent["id"], "messages": user_message(), "title": "  Leave  "},
        headers={**alice.headers, "X-Stream-Response": "false"},
    )
    assert response.status_code == 202, response.text
    thread_id = response.headers["x-thread-id"]
    assert response.json() == {"threadId": thread_id, "status": "in_progress"}
    assert (await conversation(chat, alice, thread_id))["streamStatus"] == "in_progress"
    saved = await settled(chat, alice, thread_id)
    assert saved["streamStatus"] == "completed"
    assert saved["title"] == "Leave"
    assert saved["messages"][-1]["parts"] == [{"type": "text", "text": "Slow answer."}]


async def test_a_follow_up_carries_the_history_and_keeps_the_thread(chat, alice, holder):
    model = script(holder, text_script("First answer."), text_script("Second answer."))
    agent = await make_agent(chat, alice)
    first = await chat.post(
        "/chat",
        json={"agentId": agent["id"], "messages": user_message("Hello")},
        headers={**alice.headers, "X-Stream-Response": "false"},
    )
    thread_id = first.headers["x-thread-id"]
    await settled(chat, alice, thread_id)
    second = await chat.post(
        "/chat",
        json={"agentId": agent["id"], "threadId": thread_id, "messages": user_message("More?")},
        headers=alice.headers,
    )
    assert second.status_code == 200, second.text
    assert second.headers["x-thread-id"] == thread_id
    turns = [(t.role, t.content) for t in model.requests[1].turns[1:]]
    assert turns == [("user", "Hello"), ("assistant", "First answer."), ("user", "More?")]
    saved = await settled(chat, alice, thread_id)
    assert [m["role"] for m in saved["messages"]] == ["user", "assistant", "user", "assistant"]


async def test_knowledge_base_sources_reach_the_stream_and_the_saved_message(chat, alice, holder):
    from tests.http.helpers import make_kb

    script(holder, text_script("See the handbook."))
    kb = await make_kb(chat, alice)
    agent = await make_agent(chat, alice, knowledgeBaseIds=[kb["id"]])
    # No file is processed here: the search finds nothing, so no source is cited.
    response = await chat.post(
        "/chat", json={"agentId": agent["id"], "messages": user_message()}, headers=alice.headers
    )
    assert response.status_code == 200
    assert "source-document" not in response.text
    assert_accepted(run_ai_sdk_parser(response.content))


async def test_a_provider_failure_mid_stream_keeps_what_was_produced(chat, alice, holder):
    script(holder, [TextDelta("Half an "), ChatModelError("The model did not answer in time.")])
    agent = await make_agent(chat, alice)
    response = await chat.post(
        "/chat", json={"agentId": agent["id"], "messages": user_message()}, headers=alice.headers
    )
    assert response.status_code == 200
    chunks = events(response.content)
    assert chunks[-3:] == [
        {"type": "error", "errorText": "The model did not answer in time."},
        {"type": "finish"},
        "[DONE]",
    ]
    result = run_ai_sdk_parser(response.content)
    assert result["errors"] == []
    saved = await settled(chat, alice, response.headers["x-thread-id"])
    assert saved["streamStatus"] == "failed"
    assert saved["messages"][-1]["parts"] == [
        {"type": "text", "text": "Half an "},
        {"type": "data-error", "data": {"errorText": "The model did not answer in time."}},
    ]


async def test_a_running_answer_is_resumed_from_its_start(chat, alice, holder):
    script(holder, [TextDelta("One "), 0.3, TextDelta("two "), 0.3, TextDelta("three.")])
    agent = await make_agent(chat, alice)
    thread_id = await start_polled(chat, alice, agent)
    await asyncio.sleep(0.1)
    resumed = await chat.get(f"/chat/{thread_id}/stream", headers=alice.headers)
    assert resumed.status_code == 200
    assert resumed.headers["x-vercel-ai-ui-message-stream"] == "v1"
    chunks = events(resumed.content)
    assert chunks[0]["type"] == "start" and chunks[-1] == "[DONE]"
    deltas = [c["delta"] for c in chunks if isinstance(c, dict) and c["type"] == "text-delta"]
    assert deltas == ["One ", "two ", "three."]
    assert_accepted(run_ai_sdk_parser(resumed.content))
    after = await chat.get(f"/chat/{thread_id}/stream", headers=alice.headers)
    assert after.status_code == 204


async def test_cancel_stops_the_answer_and_keeps_its_text(chat, alice, holder):
    script(holder, [TextDelta("Started "), 30.0, TextDelta("never sent")])
    agent = await make_agent(chat, alice)
    thread_id = await start_polled(chat, alice, agent)
    await asyncio.sleep(0.1)
    response = await chat.post(f"/chat/{thread_id}/cancel", headers=alice.headers)
    assert response.status_code == 200, response.text
    assert response.json() == {
        "success": True,
        "threadId": thread_id,
        "cancelled": True,
        "streamStatus": "cancelled",
    }
    saved = await conversation(chat, alice, thread_id)
    assert saved["streamStatus"] == "cancelled"
    assert saved["messages"][-1]["parts"] == [{"type": "text", "text": "Started "}]
    again = await chat.post(f"/chat/{thread_id}/cancel", headers=alice.headers)
    assert again.json()["cancelled"] is False
    assert (await chat.get(f"/chat/{thread_id}/stream", headers=alice.headers)).status_code == 204


async def test_a_second_message_while_answering_is_409(chat, alice, holder):
    script(holder, [TextDelta("Busy "), 30.0])
    agent = await make_agent(chat, alice)
    thread_id = await start_polled(chat, alice, agent)
    again = await chat.post(
        "/chat",
        json={"agentId": agent["id"], "threadId": thread_id, "messages": user_message("And?")},
        headers=alice.headers,
    )
    assert again.status_code == 409
    assert again.json() == {"error": "A response is still being generated in this conversation"}
    await chat.post(f"/chat/{thread_id}/cancel", headers=alice.headers)


async def test_another_server_process_resumes_the_stream_from_the_database(
    chat, alice, holder, settings, database
):
    # Long enough that a second app started on a busy machine still finds the answer running.
    script(holder, [TextDelta("From "), 0.3, TextDelta("process "), 1.5, TextDelta("one.")])
    agent = await make_agent(chat, alice)
    thread_id = await start_polled(chat, alice, agent)
    app = create_app(settings, database, ScriptedModels(Holder()))
    async with AsyncTestClient(app=app) as two:
        await asyncio.sleep(0.1)
        resumed = await two.get(f"/chat/{thread_id}/stream", headers=alice.headers)
    assert resumed.status_code == 200
    chunks = events(resumed.content)
    deltas = [c["delta"] for c in chunks if isinstance(c, dict) and c["type"] == "text-delta"]
    # The log keeps the deltas that arrived together as one.
    assert "".join(deltas) == "From process one."
    assert chunks[-2:] == [{"type": "finish"}, "[DONE]"]
    assert_accepted(run_ai_sdk_parser(resumed.content))


async def test_a_cancel_sent_to_another_server_process_stops_the_answer_at_once(
    chat, alice, holder, settings, database
):
    script(holder, [TextDelta("Started "), 30.0, TextDelta("never sent")])
    agent = await make_agent(chat, alice)
    thread_id = await start_polled(chat, alice, agent)
    app = create_app(settings, database, ScriptedModels(Holder()))
    async with AsyncTestClient(app=app) as two:
        await asyncio.sleep(0.2)
        cancel = await two.post(f"/chat/{thread_id}/cancel", headers=alice.headers)
    assert cancel.status_code == 200
    assert cancel.json()["streamStatus"] == "cancelled"
    saved = await conversation(chat, alice, thread_id)
    assert saved["streamStatus"] == "cancelled"
    assert saved["messages"][-1]["parts"] == [{"type": "text", "text": "Started "}]


async def test_usage_is_recorded_per_model_call(chat, alice, holder, owner_engine):
    script(holder, text_script("Hi.", usage=(40, 2)))
    agent = await make_agent(chat, alice, model="openai:gpt-4o-mini")
    response = await chat.post(
        "/chat", json={"agentId": agent["id"], "messages": user_message()}, headers=alice.headers
    )
    thread_id = response.headers["x-thread-id"]
    await settled(chat, alice, thread_id)
    # The ledger is written once the reader has the whole answer, just after it settles.
    for _ in range(100):
        async with owner_engine.connect() as connection:
            rows = (
                await connection.execute(
                    text(
                        "SELECT org_id, user_id, thread_id::text, purpose, model, input_tokens,"
                        " output_tokens, cost_usd FROM usage_events"
                    )
                )
            ).all()
        if rows:
            break
        await asyncio.sleep(0.02)
    assert [tuple(r) for r in rows] == [
        (
            "org_a",
            alice.user,
            thread_id,
            "chat",
            "openai:gpt-4o-mini",
            40,
            2,
            Decimal("0.00000720"),
        )
    ]


BAD_BODIES = [
    ({"messages": []}, "messages must be a non-empty array"),
    ({"messages": None}, "messages must be a non-empty array"),
    ({"messages": [{"role": "user"}]}, "A message needs a non-empty parts array"),
    ({"messages": [{"role": "user", "parts": []}]}, "A message needs a non-empty parts array"),
    (
        {"messages": [{"role": "assistant", "parts": [{"type": "text", "text": "x"}]}]},
        "The message sent must have role user",
    ),
    (
        {"messages": [{"role": "user", "parts": [{"type": "text"}]}]},
        "A text part needs non-empty text",
    ),
    (
        {"messages": [{"role": "user", "parts": [{"type": "text", "text": "  "}]}]},
        "A text part needs non-empty text",
    ),
    ({"agentId": "seven"}, "Valid agent ID is required"),
    ({"agentId": None}, "Valid agent ID is required"),
    ({"threadId": "not-a-uuid"}, "threadId must be a valid UUID"),
    ({"title": "x" * 121}, "title must be at most 120 characters"),
    ({"title": "two\nlines"}, "title must be a single line"),
    ({"title": "bell\x07"}, "title must not contain control characters"),
    ({"title": "   "}, "title must not be empty"),
    ({"upstreamConversationId": "nope"}, "upstreamConversationId must be a valid UUID"),
]


@pytest.mark.parametrize(("override", "message"), BAD_BODIES)
async def test_bad_requests_are_400_and_create_nothing(
    chat, alice, owner_engine, override, message
):
    agent = await make_agent(chat, alice)
    body = {"agentId": agent["id"], "messages": user_message(), **override}
    response = await chat.post("/chat", json=body, headers=alice.headers)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == message
    async with owner_engine.connect() as connection:
        count = (await connection.execute(text("SELECT count(*) FROM conversations"))).scalar()
    assert count == 0


async def test_a_title_with_an_existing_thread_is_400(chat, alice, holder):
    script(holder, text_script("ok"))
    agent = await make_agent(chat, alice)
    first = await chat.post(
        "/chat", json={"agentId": agent["id"], "messages": user_message()}, headers=alice.headers
    )
    thread_id = first.headers["x-thread-id"]
    response = await chat.post(
        "/chat",
        json={
            "agentId": agent["id"],
            "threadId": thread_id,
            "title": "New",
            "messages": user_message(),
        },
        headers=alice.headers,
    )
    assert response.status_code == 400
    assert response.json()["error"] == "title can only be given when creating a conversation"


async def test_unknown_and_foreign_agents_and_threads_are_404(chat, alice, member, holder):
    bob = member("org_b", "user_bob", "admin")
    script(holder, text_script("ok"), text_script("ok"))
    mine = await make_agent(chat, alice)
    theirs = await make_agent(chat, bob)
    for agent_id in (theirs["id"], 999_999):
        response = await chat.post(
            "/chat", json={"agentId": agent_id, "messages": user_message()}, headers=alice.headers
        )
        assert response.status_code == 404
        assert response.json() == {"error": "Agent not found"}
    first = await chat.post(
        "/chat", json={"agentId": theirs["id"], "messages": user_message()}, headers=bob.headers
    )
    foreign_thread = first.headers["x-thread-id"]
    for thread_id in (foreign_thread, str(uuid.uuid4())):
        response = await chat.post(
            "/chat",
            json={"agentId": mine["id"], "threadId": thread_id, "messages": user_message()},
            headers=alice.headers,
        )
        assert response.status_code == 404
        assert response.json() == {"error": "Conversation not found"}
        assert (
            await chat.get(f"/chat/{thread_id}/stream", headers=alice.headers)
        ).status_code == 404
        assert (
            await chat.post(f"/chat/{thread_id}/cancel", headers=alice.headers)
        ).status_code == 404
    assert (await chat.get("/chat/nope/stream", headers=alice.headers)).status_code == 400


async def test_the_stream_mode_header_must_be_a_boolean(chat, alice):
    agent = await make_agent(chat, alice)
    response = await chat.post(
        "/chat",
        json={"agentId": agent["id"], "messages": user_message()},
        headers={**alice.headers, "X-Stream-Response": "maybe"},
    )
    assert response.status_code == 400
    assert response.json()["error"] == "X-Stream-Response must be true or false"


async def test_chat_needs_a_token(chat):
    response = await chat.post("/chat", json={"agentId": 1, "messages": user_message()})
    assert response.status_code == 401
    assert response.json() == {"error": "Unauthorized"}
