"""Spend caps over HTTP: a chat at a cap is refused with 402 before anything is stored, and many
simultaneous chats against a priced model cannot together run past the cap by more than one
call's worst case."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from application.ports.chat_model import TextDelta, Usage
from domain.usage import ModelPrice
from entrypoints.http.app import create_app
from tests.fakes.chat import ScriptedChatModel, text_script
from tests.http.chat_support import Holder, ScriptedModels, make_agent, settled, user_message
from tests.http.conftest import forget_members

# A cent per prompt token, output free: a call's worst case is its context window (100 tokens,
# $1.00); each answer reports 90 prompt tokens ($0.90).
PRICE = ModelPrice(Decimal(10_000), Decimal(0))
CONTEXT = 100
WORST_CASE = Decimal("1.00")
ANSWER_COST = Decimal("0.90")


@pytest.fixture(scope="session")
async def priced_session(settings, database) -> AsyncIterator[tuple[AsyncTestClient, Holder]]:
    holder = Holder()
    priced = dataclasses.replace(settings, model_prices={"openai:scripted": PRICE})
    app = create_app(priced, database, ScriptedModels(holder))
    async with AsyncTestClient(app=app) as client:
        client.ap_app = app  # type: ignore[attr-defined]
        yield client, holder


@pytest.fixture
async def priced(priced_session, clean) -> tuple[AsyncTestClient, Holder]:
    client, holder = priced_session
    await forget_members(client)
    return client, holder


async def set_caps(owner_engine: Any, org: str, caps: dict[str, float]) -> None:
    async with owner_engine.begin() as connection:
        await connection.execute(
            text("INSERT INTO org_settings (org_id, settings) VALUES (:org, CAST(:s AS jsonb))"),
            {"org": org, "s": json.dumps({"spendCaps": caps})},
        )


async def scalar(owner_engine: Any, sql: str) -> Any:
    async with owner_engine.connect() as connection:
        return (await connection.execute(text(sql))).scalar()


async def test_a_chat_at_a_cap_is_402_with_each_period_and_stores_nothing(
    priced, alice, owner_engine
):
    client, holder = priced
    holder.model = ScriptedChatModel(text_script("never"), context_tokens=CONTEXT)
    agent = await make_agent(client, alice)
    await set_caps(owner_engine, alice.org, {"daily": 0, "weekly": 50, "monthly": 0})
    response = await client.post(
        "/chat", json={"agentId": agent["id"], "messages": user_message()}, headers=alice.headers
    )
    assert response.status_code == 402, response.text
    body = response.json()
    assert body["error"] == "Spend cap reached"
    assert [(d["period"], d["cap"], d["spent"]) for d in body["details"]] == [
        ("daily", 0, 0),
        ("monthly", 0, 0),
    ]
    now = datetime.now(UTC)
    month_end = datetime.fromisoformat(body["details"][1]["resetsAt"])
    assert month_end.day == 1 and month_end > now
    retry_after = int(response.headers["retry-after"])
    assert abs(retry_after - (month_end - now).total_seconds()) < 5
    assert holder.model.requests == []
    assert await scalar(owner_engine, "SELECT count(*) FROM conversations") == 0
    assert await scalar(owner_engine, "SELECT count(*) FROM spend_reservations") == 0
    # The polling mode is refused the same way, and a follow-up in an existing thread too.
    polled = await client.post(
        "/chat",
        json={"agentId": agent["id"], "messages": user_message()},
        headers={**alice.headers, "X-Stream-Response": "false"},
    )
    assert polled.status_code == 402 and "retry-after" in polled.headers


async def test_below_the_cap_a_chat_is_charged_what_its_model_reported(priced, alice, owner_engine):
    client, holder = priced
    holder.model = ScriptedChatModel([TextDelta("Fine."), Usage(90, 2)], context_tokens=CONTEXT)
    agent = await make_agent(client, alice)
    await set_caps(owner_engine, alice.org, {"daily": 5})
    response = await client.post(
        "/chat",
        json={"agentId": agent["id"], "messages": user_message()},
        headers={**alice.headers, "X-Stream-Response": "false"},
    )
    assert response.status_code == 202, response.text
    done = await settled(client, alice, response.json()["threadId"])
    assert done["streamStatus"] == "completed"
    await asyncio.sleep(0.1)  # the charge is written once the stream has ended
    assert await scalar(owner_engine, "SELECT sum(cost_usd) FROM usage_events") == ANSWER_COST
    assert await scalar(owner_engine, "SELECT count(*) FROM spend_reservations") == 0


async def test_twenty_simultaneous_chats_stop_within_one_worst_case_of_the_cap(
    priced, alice, owner_engine
):
    client, holder = priced
    answer = [TextDelta("Part one, "), 0.05, TextDelta("part two."), Usage(90, 4)]
    holder.model = ScriptedChatModel(*([answer] * 20), context_tokens=CONTEXT)
    agent = await make_agent(client, alice)
    cap = Decimal(3)
    await set_caps(owner_engine, alice.org, {"daily": float(cap)})

    async def send() -> tuple[int, Any]:
        response = await client.post(
            "/chat",
            json={"agentId": agent["id"], "messages": user_message()},
            headers={**alice.headers, "X-Stream-Response": "false"},
        )
        if response.status_code == 202:
            return 202, await settled(client, alice, response.json()["threadId"])
        return response.status_code, response

    results = await asyncio.gather(*(send() for _ in range(20)))
    await asyncio.sleep(0.2)
    statuses = sorted(status for status, _ in results)
    answered = [body for status, body in results if status == 202]
    refused = [response for status, response in results if status == 402]
    assert len(answered) + len(refused) == 20, statuses
    assert answered and refused
    assert all(body["streamStatus"] == "completed" for body in answered)
    for response in refused:
        assert response.json()["error"] == "Spend cap reached"
        assert int(response.headers["retry-after"]) > 0
    spent = await scalar(owner_engine, "SELECT sum(cost_usd) FROM usage_events")
    assert spent == ANSWER_COST * len(answered)
    assert spent <= cap + WORST_CASE
    # Only the answered chats stored a conversation; nothing stays reserved.
    assert await scalar(owner_engine, "SELECT count(*) FROM conversations") == len(answered)
    assert await scalar(owner_engine, "SELECT count(*) FROM spend_reservations") == 0


async def test_a_chat_is_admitted_even_when_its_request_holds_the_only_connection(
    settings, database, clean, alice, owner_engine
):
    """The ledger has a pool of its own: admitting the answer while the request holds the main
    pool's only connection must not wait for a second one."""
    holder = Holder()
    holder.model = ScriptedChatModel([TextDelta("Fine."), Usage(90, 2)], context_tokens=CONTEXT)
    tight = dataclasses.replace(
        settings, model_prices={"openai:scripted": PRICE}, database_pool_size=1
    )
    app = create_app(tight, database, ScriptedModels(holder))
    await set_caps(owner_engine, alice.org, {"daily": 5})
    async with AsyncTestClient(app=app) as client:
        agent = await make_agent(client, alice)
        response = await asyncio.wait_for(
            client.post(
                "/chat",
                json={"agentId": agent["id"], "messages": user_message()},
                headers={**alice.headers, "X-Stream-Response": "false"},
            ),
            20,
        )
        assert response.status_code == 202, response.text
        done = await asyncio.wait_for(settled(client, alice, response.json()["threadId"]), 20)
    assert done["streamStatus"] == "completed"
