"""What the chat tests share: a scripted chat model swapped into the app, an agent to talk to,
and helpers to send a message, wait for the answer and read its events."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from dishka import Provider, Scope, provide
from litestar.testing import AsyncTestClient

from application.ports.chat_model import ChatModelRegistry
from tests.fakes.chat import ScriptedChatModel, ScriptedChatRegistry


class Holder:
    def __init__(self) -> None:
        self.model = ScriptedChatModel()


class ScriptedModels(Provider):
    def __init__(self, holder: Holder) -> None:
        super().__init__()
        self._registry = ScriptedChatRegistry(lambda: holder.model)

    @provide(scope=Scope.APP)
    def models(self) -> ChatModelRegistry:
        return self._registry


def script(holder: Holder, *scripts: Any) -> ScriptedChatModel:
    holder.model = ScriptedChatModel(*scripts)
    return holder.model


async def make_agent(client: AsyncTestClient, who: Any, **body: Any) -> dict[str, Any]:
    payload = {"name": "Helper", "role": "Answer briefly.", "model": "openai:scripted", **body}
    response = await client.post("/agents", json=payload, headers=who.headers)
    assert response.status_code == 201, response.text
    return response.json()["agent"]


def user_message(text: str = "What is our leave policy?") -> list[dict[str, Any]]:
    return [{"role": "user", "parts": [{"type": "text", "text": text}]}]


def events(body: bytes) -> list[Any]:
    frames = [f for f in body.decode().split("\n\n") if f]
    parsed: list[Any] = []
    for frame in frames:
        assert frame.startswith("data: "), frame
        payload = frame.removeprefix("data: ")
        parsed.append(payload if payload == "[DONE]" else json.loads(payload))
    return parsed


async def conversation(client: AsyncTestClient, who: Any, thread_id: str) -> dict[str, Any]:
    response = await client.get(
        "/getConversation", params={"threadId": thread_id}, headers=who.headers
    )
    assert response.status_code == 200, response.text
    return response.json()


async def start_polled(client: AsyncTestClient, who: Any, agent: dict[str, Any]) -> str:
    """Send a message in polling mode; the conversation's id."""
    response = await client.post(
        "/chat",
        json={"agentId": agent["id"], "messages": user_message()},
        headers={**who.headers, "X-Stream-Response": "false"},
    )
    assert response.status_code == 202, response.text
    return str(response.headers["x-thread-id"])


async def settled(client: AsyncTestClient, who: Any, thread_id: str) -> dict[str, Any]:
    for _ in range(200):
        body = await conversation(client, who, thread_id)
        if body["streamStatus"] != "in_progress":
            return body
        await asyncio.sleep(0.05)
    raise AssertionError("the response never ended")
