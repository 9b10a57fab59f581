"""Faults in `serve`'s children on the embedded defaults, over real HTTP: the model runner
killed or hung in the middle of an answer, the worker child killed. Each time the API keeps
answering, nothing stays in progress, and the next answer or file goes through."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest

from tests.e2e.test_chat_serve import Server, message, wait_for_end

STOPPED = "The local model stopped unexpectedly."


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    running = Server(tmp_path_factory.mktemp("faults"))
    running.env["AP_LOCAL_MODEL_STALL_TIMEOUT"] = "10"
    # Faults strike at an answer's first words; the answers after them need only end.
    running.env["AP_CHAT_MAX_OUTPUT_TOKENS"] = "64"
    running.start()
    try:
        yield running
    finally:
        if running.process is not None:
            running.stop()


def test_sigterm_stops_serve_and_every_child(tmp_path):
    running = Server(tmp_path)
    running.start()
    assert running.process is not None
    wait_for_child(running, "adapters.local_model.runner")
    wait_for_child(running, "worker")
    family = psutil.Process(running.process.pid).children(recursive=True)

    output = running.stop()

    assert family
    _gone, alive = psutil.wait_procs(family, timeout=10)
    assert alive == [], [p.cmdline() for p in alive]
    assert "worker.child_stopped" in output


def children(server: Server, marker: str) -> list[psutil.Process]:
    assert server.process is not None
    return [
        child
        for child in psutil.Process(server.process.pid).children()
        if marker in " ".join(child.cmdline())
    ]


def wait_for_child(server: Server, marker: str, other_than: int | None = None) -> psutil.Process:
    deadline = time.monotonic() + 90
    while True:
        found = [c for c in children(server, marker) if c.pid != other_than]
        if found:
            return found[0]
        assert time.monotonic() < deadline, f"no {marker} child"
        time.sleep(0.2)


class HealthProbe:
    """Asks /health every 100 ms in the background; counts the answers that were not 200."""

    def __init__(self, server: Server) -> None:
        self._base = server.base
        self.failures: list[str] = []
        self.answers = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                status = httpx.get(f"{self._base}/health", timeout=5).status_code
                self.answers += 1
                if status != 200:
                    self.failures.append(str(status))
            except httpx.HTTPError as error:
                self.failures.append(repr(error))
            time.sleep(0.1)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)


def stream_with_fault(server: Server, headers: dict[str, str], fault: int) -> tuple[str, list]:
    """Stream an answer and send `fault` to the model runner once its first words arrived."""
    agent = httpx.post(f"{server.base}/agents", json={"name": "Teller"}, headers=headers).json()
    runner = wait_for_child(server, "adapters.local_model.runner")
    body = {"agentId": agent["agent"]["id"], "messages": message("Write a very long story.")}
    chunks: list[dict[str, Any]] = []
    with httpx.stream("POST", f"{server.base}/chat", json=body, headers=headers, timeout=120) as r:
        thread_id = r.headers["x-thread-id"]
        signalled = False
        for line in r.iter_lines():
            if line.startswith("data: {"):
                chunks.append(json.loads(line.removeprefix("data: ")))
                if chunks[-1]["type"] == "text-delta" and not signalled:
                    runner.send_signal(fault)
                    signalled = True
            elif line == "data: [DONE]":
                chunks.append({"type": "[DONE]"})
    return thread_id, chunks


def assert_failed_cleanly(server: Server, headers: dict[str, str], thread_id: str, chunks: list):
    kinds = [c["type"] for c in chunks]
    assert kinds[-3:] == ["error", "finish", "[DONE]"], kinds[-6:]
    assert chunks[-3]["errorText"] == STOPPED
    saved = wait_for_end(server, headers, thread_id)
    assert saved["streamStatus"] == "failed"
    assert saved["messages"][-1]["parts"][0]["text"]


def assert_next_answer_works(server: Server, headers: dict[str, str]) -> None:
    agent = httpx.post(f"{server.base}/agents", json={"name": "Next"}, headers=headers).json()
    body = {"agentId": agent["agent"]["id"], "messages": message("Name a colour.")}
    accepted = httpx.post(
        f"{server.base}/chat", json=body, headers={**headers, "X-Stream-Response": "false"}
    )
    saved = wait_for_end(server, headers, accepted.json()["threadId"])
    assert saved["streamStatus"] == "completed", saved["messages"][-1]
    assert saved["messages"][-1]["parts"][0]["text"].strip()


def test_a_model_runner_killed_mid_answer_costs_that_answer_only(server):
    headers = server.headers()
    killed = wait_for_child(server, "adapters.local_model.runner").pid
    with HealthProbe(server) as probe:
        thread_id, chunks = stream_with_fault(server, headers, signal.SIGKILL)
        assert_failed_cleanly(server, headers, thread_id, chunks)
        assert wait_for_child(server, "adapters.local_model.runner", other_than=killed)
        assert_next_answer_works(server, headers)
    assert probe.answers > 10
    assert probe.failures == []


def test_a_hung_model_runner_is_replaced_after_the_stall_timeout(server):
    headers = server.headers()
    hung = wait_for_child(server, "adapters.local_model.runner").pid
    with HealthProbe(server) as probe:
        started = time.monotonic()
        thread_id, chunks = stream_with_fault(server, headers, signal.SIGSTOP)
        assert time.monotonic() - started < 60
        assert_failed_cleanly(server, headers, thread_id, chunks)
        assert not psutil.pid_exists(hung) or psutil.Process(hung).status() == "zombie"
        assert_next_answer_works(server, headers)
    assert probe.failures == []


def test_a_killed_worker_child_is_replaced_and_the_file_goes_through(server):
    headers = server.headers()
    worker = wait_for_child(server, "worker")
    assert worker.nice() > psutil.Process(server.process.pid).nice()
    kb = httpx.post(f"{server.base}/kb/manage", json={"name": "Faults"}, headers=headers).json()[
        "knowledgeBase"
    ]
    data = b"# Leave\n\nStaff receive thirty days of paid vacation each year.\n"
    with HealthProbe(server) as probe:
        worker.kill()
        presigned = httpx.post(
            f"{server.base}/upload/presigned",
            json={"fileName": "leave.md", "contentType": "text/markdown", "fileSize": len(data)},
            headers=headers,
        ).json()
        httpx.put(presigned["uploadUrl"], content=data, headers={"Content-Type": "text/markdown"})
        httpx.post(
            f"{server.base}/kb/files",
            json={
                "kbId": kb["id"],
                "fileId": presigned["fileId"],
                "fileName": "leave.md",
                "fileKey": presigned["fileKey"],
                "contentKey": presigned["contentKey"],
                "contentType": "text/markdown",
                "fileSize": len(data),
            },
            headers=headers,
        ).raise_for_status()
        replacement = wait_for_child(server, "worker", other_than=worker.pid)
        deadline = time.monotonic() + 120
        while True:
            (file,) = httpx.get(
                f"{server.base}/kb/files", params={"kbId": kb["id"]}, headers=headers
            ).json()["files"]
            if file["processingStatus"] in ("completed", "parse_failed", "chunk_failed"):
                break
            assert time.monotonic() < deadline, file
            time.sleep(0.3)
    assert file["processingStatus"] == "completed"
    assert replacement.is_running()
    assert probe.failures == []
