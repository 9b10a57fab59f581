"""`serve` stopped in the middle of answers, over real HTTP with a scripted slow provider on
loopback (issue 31 §1): SIGTERM ends them within the grace, failed with the contract's words and
their usage recorded; SIGKILL leaves reservations that the restarted service settles. Each time
a chat answer and a scheduled run's answer (produced by the worker child) are under way."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest

from tests.e2e.serving import Server
from tests.e2e.test_chat_serve import message
from tests.integration.test_chat_model_openai import (
    ScriptedServer,
    on_a_thread,
    sse_delta,
    sse_head,
)

RESTARTED = "The service was restarted"
GRACE = 3


class SlowProvider(ScriptedServer):
    """Every answer starts ("Hel") and then stalls for two minutes."""

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.scripts.append([sse_head(), sse_delta("Hel"), 120.0, sse_delta(finish="stop")])
        await super()._serve(reader, writer)


@pytest.fixture
def provider() -> Iterator[SlowProvider]:
    with on_a_thread(SlowProvider()) as server:
        yield server


def serve(tmp_path, provider: SlowProvider) -> Server:
    return Server(
        tmp_path / "data",
        {
            "AP_OPENAI_BASE_URL": provider.url,
            "AP_OPENAI_API_KEY": "sk-test",
            "AP_SHUTDOWN_GRACE": str(GRACE),
            "AP_METRICS_CACHE_SECONDS": "0",
            "AP_MODEL_PRICES": json.dumps({"openai:gpt-test": {"input": 1.0, "output": 2.0}}),
        },
    )


class StreamedChat:
    """`POST /chat` read in a thread: its SSE lines and the thread's id."""

    def __init__(self, server: Server, headers: dict[str, str], agent_id: int) -> None:
        self.lines: list[str] = []
        self.thread_id = ""
        self.error: BaseException | None = None
        body = {"agentId": agent_id, "messages": message("Tell me a story.")}
        self._thread = threading.Thread(
            target=self._read, args=(server, headers, body), daemon=True
        )
        self._thread.start()

    def _read(self, server: Server, headers: dict[str, str], body: dict[str, Any]) -> None:
        try:
            with httpx.stream(
                "POST", f"{server.base}/chat", json=body, headers=headers, timeout=60
            ) as response:
                self.thread_id = response.headers["x-thread-id"]
                for line in response.iter_lines():
                    if line.startswith("data: "):
                        self.lines.append(line.removeprefix("data: "))
        except BaseException as error:
            self.error = error

    def chunks(self) -> list[Any]:
        return [line if line == "[DONE]" else json.loads(line) for line in self.lines]

    def join(self) -> None:
        self._thread.join(30)


def start_answers(
    server: Server, provider: SlowProvider
) -> tuple[dict[str, str], StreamedChat, str]:
    """A streamed chat answer and a scheduled run's answer, both under way."""
    headers = server.headers()
    agent = httpx.post(
        f"{server.base}/agents",
        json={"name": "Remote", "model": "openai:gpt-test"},
        headers=headers,
    )
    assert agent.status_code == 201, agent.text
    agent_id = agent.json()["agent"]["id"]
    task = httpx.post(
        f"{server.base}/scheduled-tasks",
        json={"agentId": agent_id, "name": "Digest", "prompt": "Summarise.", "cron": "@daily"},
        headers=headers,
    )
    assert task.status_code == 201, task.text
    task_id = task.json()["task"]["id"]
    chat = StreamedChat(server, headers, agent_id)
    run = httpx.post(
        f"{server.base}/scheduled-tasks/run", json={"taskId": task_id}, headers=headers
    )
    assert run.status_code == 202, run.text
    deadline = time.monotonic() + 90
    while len(provider.bodies) < 2 or not any('"Hel"' in line for line in chat.lines):
        assert chat.error is None, chat.error
        assert time.monotonic() < deadline, (provider.bodies, chat.lines)
        time.sleep(0.2)
    return headers, chat, task_id


def model_usage(server: Server) -> dict[str, float]:
    """`ap_model_tokens` (by direction) and `ap_model_cost_usd` of the provider `openai`, from
    `/metrics`."""
    found: dict[str, float] = {}
    for name, labels, value in re.findall(
        r"^(ap_model_tokens|ap_model_cost_usd)(?:_total)?\{([^}]*)\} (\S+)$",
        httpx.get(f"{server.base}/metrics").text,
        re.MULTILINE,
    ):
        label = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if label.get("provider") == "openai":
            found[f"{name}:{label['direction']}" if "direction" in label else name] = float(value)
    return found


def scheduled_run(server: Server, headers: dict[str, str], task_id: str) -> dict[str, Any]:
    runs = httpx.get(
        f"{server.base}/scheduled-tasks/runs", params={"taskId": task_id}, headers=headers
    ).json()["runs"]
    (run,) = runs
    return run


def stored(server: Server, headers: dict[str, str], thread_id: str) -> dict[str, Any]:
    return httpx.get(
        f"{server.base}/getConversation", params={"threadId": thread_id}, headers=headers
    ).json()


def test_sigterm_ends_running_answers_within_the_grace_and_records_their_usage(tmp_path, provider):
    server = serve(tmp_path, provider)
    server.start()
    assert server.process is not None
    headers, chat, task_id = start_answers(server, provider)

    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(GRACE + 30)
    took = time.monotonic() - started
    output = server.output()
    chat.join()

    assert took < GRACE + 5, output
    assert chat.chunks()[-3:] == [
        {"type": "error", "errorText": RESTARTED},
        {"type": "finish"},
        "[DONE]",
    ]
    server.start()
    try:
        saved = httpx.get(
            f"{server.base}/getConversation", params={"threadId": chat.thread_id}, headers=headers
        ).json()
        assert saved["streamStatus"] == "failed"
        assert RESTARTED in json.dumps(saved["messages"][-1])
        run = scheduled_run(server, headers, task_id)
        assert (run["status"], run["error"]) == ("failed", RESTARTED)
        usage = model_usage(server)
        assert usage["ap_model_tokens:input"] > 0, usage
        # "Hel" (one token, estimated) in each answer, each charged once.
        assert usage["ap_model_tokens:output"] == 2, usage
        assert usage["ap_model_cost_usd"] > 0, usage
    finally:
        server.stop()


def test_a_second_sigterm_skips_the_grace(tmp_path, provider):
    server = serve(tmp_path, provider)
    server.env["AP_SHUTDOWN_GRACE"] = "60"
    server.start()
    assert server.process is not None
    _headers, chat, _task_id = start_answers(server, provider)

    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    time.sleep(1)
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(60)
    chat.join()

    assert time.monotonic() - started < 1 + 5 + 3, server.output()
    assert chat.chunks()[-3:-1] == [{"type": "error", "errorText": RESTARTED}, {"type": "finish"}]


def test_sigkill_leaves_reservations_the_restarted_service_settles(tmp_path, provider):
    server = serve(tmp_path, provider)
    server.start()
    assert server.process is not None
    headers, chat, task_id = start_answers(server, provider)
    # A silent model's last words are stored with the answer's next heartbeat (10 s).
    threads = [chat.thread_id, scheduled_run(server, headers, task_id)["threadId"]]
    deadline = time.monotonic() + 30
    while not all('"Hel"' in json.dumps(stored(server, headers, t)["messages"]) for t in threads):
        assert time.monotonic() < deadline, [stored(server, headers, t) for t in threads]
        time.sleep(0.5)
    family = [
        psutil.Process(server.process.pid),
        *psutil.Process(server.process.pid).children(recursive=True),
    ]
    killed_at = time.monotonic()
    for process in family:
        process.kill()
    psutil.wait_procs(family, timeout=10)
    server.process = None
    chat.join()
    # The answers' producers went silent when killed; the reaper fails them once they have been
    # silent a minute, at the restarted worker's first pass, and charges their reservations.
    time.sleep(max(0.0, 55 - (time.monotonic() - killed_at)))
    server.start()
    try:
        deadline = time.monotonic() + 150
        while "ap_model_tokens:input" not in (usage := model_usage(server)):
            assert time.monotonic() < deadline, server.output()
            time.sleep(2)
        while usage.get("ap_model_tokens:output", 0) < 2:
            assert time.monotonic() < deadline, (usage, server.output())
            time.sleep(2)
            usage = model_usage(server)
        assert usage["ap_model_tokens:output"] == 2, usage  # charged once each
        assert usage["ap_model_cost_usd"] > 0
        saved = httpx.get(
            f"{server.base}/getConversation", params={"threadId": chat.thread_id}, headers=headers
        ).json()
        assert saved["streamStatus"] == "failed"
    finally:
        server.stop()
