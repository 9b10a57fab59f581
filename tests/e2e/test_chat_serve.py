"""Chat against `serve` on the embedded defaults with the bundled local model, over real HTTP:
both response modes, a client that disconnects, the AI SDK's parser, and a shutdown mid-answer."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.ai_sdk import assert_accepted, run_ai_sdk_parser
from tests.e2e.serving import Server


def serving(data_dir: Path, env: dict[str, str] | None = None) -> Iterator[Server]:
    running = Server(data_dir, env)
    running.start()
    try:
        yield running
    finally:
        if running.process is not None:
            running.stop()


@pytest.fixture(scope="module")
def short_answers(tmp_path_factory) -> Iterator[Server]:
    """One server for the tests that only need answers to end: short ones end sooner."""
    yield from serving(tmp_path_factory.mktemp("chat-serve"), {"AP_CHAT_MAX_OUTPUT_TOKENS": "48"})


@pytest.fixture
def server(tmp_path) -> Iterator[Server]:
    yield from serving(tmp_path)


def message(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "parts": [{"type": "text", "text": text}]}]


def wait_for_end(server: Server, headers: dict[str, str], thread_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        body = httpx.get(
            f"{server.base}/getConversation", params={"threadId": thread_id}, headers=headers
        ).json()
        if body["streamStatus"] != "in_progress":
            return body
        assert time.monotonic() < deadline, "the answer never ended"
        time.sleep(0.3)


def test_chat_with_the_bundled_model_in_both_modes(short_answers):
    server = short_answers
    headers = server.headers()
    agent = httpx.post(
        f"{server.base}/agents",
        json={"name": "Guide", "role": "You are a concise assistant."},
        headers=headers,
    ).json()["agent"]
    assert agent["model"] == "local:smollm2-135m"

    body = {"agentId": agent["id"], "messages": message("Name a colour of the sky.")}
    with httpx.stream("POST", f"{server.base}/chat", json=body, headers=headers, timeout=120) as r:
        assert r.status_code == 200
        assert r.headers["x-vercel-ai-ui-message-stream"] == "v1"
        thread_id = r.headers["x-thread-id"]
        raw = r.read()
    assert raw.endswith(b"data: [DONE]\n\n")
    result = run_ai_sdk_parser(raw)
    assert_accepted(result)
    text = "".join(p["text"] for p in result["message"]["parts"] if p["type"] == "text")
    assert text.strip()

    follow_up = {"agentId": agent["id"], "threadId": thread_id, "messages": message("Why?")}
    accepted = httpx.post(
        f"{server.base}/chat", json=follow_up, headers={**headers, "X-Stream-Response": "false"}
    )
    assert accepted.status_code == 202
    assert accepted.json() == {"threadId": thread_id, "status": "in_progress"}
    saved = wait_for_end(server, headers, thread_id)
    assert saved["streamStatus"] == "completed"
    assert [m["role"] for m in saved["messages"]] == ["user", "assistant", "user", "assistant"]
    assert saved["messages"][1]["parts"][0]["text"] == text
    assert saved["title"]


def test_a_client_that_disconnects_loses_nothing(short_answers):
    server = short_answers
    headers = server.headers()
    agent = httpx.post(f"{server.base}/agents", json={"name": "Guide"}, headers=headers).json()
    body = {"agentId": agent["agent"]["id"], "messages": message("Tell me about rivers.")}
    with httpx.stream("POST", f"{server.base}/chat", json=body, headers=headers, timeout=120) as r:
        thread_id = r.headers["x-thread-id"]
        received = []
        for line in r.iter_lines():
            if line.startswith("data: {"):
                received.append(json.loads(line.removeprefix("data: ")))
            if any(c["type"] == "text-delta" for c in received):
                break
    saved = wait_for_end(server, headers, thread_id)
    assert saved["streamStatus"] == "completed"
    answer = saved["messages"][-1]["parts"][0]["text"]
    assert answer.startswith(next(c["delta"] for c in received if c["type"] == "text-delta"))


def test_an_answer_cut_by_a_shutdown_ends_failed_with_its_text(server):
    headers = server.headers()
    agent = httpx.post(f"{server.base}/agents", json={"name": "Guide"}, headers=headers).json()
    body = {"agentId": agent["agent"]["id"], "messages": message("Write a long story.")}
    accepted = httpx.post(
        f"{server.base}/chat", json=body, headers={**headers, "X-Stream-Response": "false"}
    )
    thread_id = accepted.json()["threadId"]
    deadline = time.monotonic() + 60
    while True:
        saved = httpx.get(
            f"{server.base}/getConversation", params={"threadId": thread_id}, headers=headers
        ).json()
        parts = saved["messages"][-1]["parts"]
        if parts and parts[0]["text"]:
            break
        assert time.monotonic() < deadline, "no text was stored"
        time.sleep(0.2)
    server.stop()
    server.start()
    saved = wait_for_end(server, server.headers(), thread_id)
    assert saved["streamStatus"] == "failed"
    assert saved["messages"][-1]["parts"][0]["text"]
