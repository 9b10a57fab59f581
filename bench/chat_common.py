"""Helpers shared by `chat_stream.py` and `chat_local_tokens.py`: starting `agent-platform
serve` on a temporary data dir, minting tokens, creating an agent, and reading one streamed
answer (OpenAI chat-completion chunks or the AI SDK UI message stream) with the same client
code on both sides, timing its first content and its end."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from kb_endpoints import (
    BenchError,
    Process,
    executable,
    expect,
    free_port,
    start,
    stop,
    stop_leftover_postgres,
    tail,
    wait_ready,
)

ORG_ID = "org_bench"


class ScriptedRig:
    """A bench's `serve` (`platform`) and its scripted provider (`provider`): stopping both,
    and the tail of their logs for a failure's report."""

    platform: Platform | None
    provider: Process | None

    def stop_all(self) -> None:
        if self.platform is not None:
            self.platform.stop()
        if self.provider is not None:
            stop(self.provider)

    def logs(self) -> str:
        parts = []
        if self.platform is not None:
            parts.append(f"--- serve log (tail) ---\n{tail(self.platform.process.log)}")
        if self.provider is not None:
            parts.append(f"--- provider log (tail) ---\n{tail(self.provider.log)}")
        return "\n".join(parts)


@dataclass
class Platform:
    """`agent-platform serve` on its own data dir (embedded PostgreSQL)."""

    data_dir: Path
    process: Process
    port: int
    env: dict[str, str]

    @classmethod
    def start(cls, data_dir: Path, extra_env: dict[str, str]) -> Platform:
        port = free_port()
        env = {"AP_DATA_DIR": str(data_dir), "AP_PORT": str(port), **extra_env}
        process = start(
            "serve", [executable("agent-platform"), "serve"], env, data_dir / "serve.log"
        )
        platform = cls(data_dir, process, port, env)
        wait_ready(process, port, "/health")
        return platform

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pgdata"

    def token(self, user: str, role: str = "member") -> str:
        done = subprocess.run(
            [executable("agent-platform"), "token", "--org", ORG_ID, "--user", user,
             "--role", role, "--ttl", "86400"],
            env={**os.environ, **self.env}, capture_output=True, text=True, check=True,
        )  # fmt: skip
        return done.stdout.strip()

    def create_agent(self, token: str, body: dict[str, Any]) -> int:
        response = httpx.post(
            f"{self.url}/agents",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30.0,
        )
        return int(expect(response, 201)["agent"]["id"])

    def stop(self) -> None:
        stop(self.process)
        stop_leftover_postgres(self.pgdata)


def chat_body(agent_id: int, text: str, title: str) -> dict[str, Any]:
    """A new conversation with a supplied title, so no title-generation job runs alongside."""
    return {
        "agentId": agent_id,
        "title": title,
        "messages": [{"role": "user", "parts": [{"type": "text", "text": text}]}],
    }


@dataclass
class StreamResult:
    status: int
    started: float
    wall_started: float = 0.0
    first: float | None = None
    done: float | None = None
    last_delta: float | None = None
    text: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    thread_id: str | None = None
    body_bytes: int = 0
    # When the response headers and each event type were first seen (perf_counter).
    marks: dict[str, float] = field(default_factory=dict)

    @property
    def first_ms(self) -> float:
        assert self.first is not None
        return (self.first - self.started) * 1000

    @property
    def last_ms(self) -> float:
        assert self.done is not None
        return (self.done - self.started) * 1000

    @property
    def ok(self) -> bool:
        return (
            self.status == 200 and self.first is not None and self.done is not None
        ) and not self.errors


def openai_delta(event: dict[str, Any]) -> str | None:
    choices = event.get("choices") or []
    if choices:
        content = (choices[0].get("delta") or {}).get("content")
        if content:
            return str(content)
    return None


def ui_delta(event: dict[str, Any]) -> str | None:
    kind = event.get("type")
    if kind == "text-delta":
        return str(event.get("delta", ""))
    if kind == "error":
        raise _StreamError(str(event.get("errorText")))
    return None


class _StreamError(Exception):
    pass


async def read_stream(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    delta: Callable[[dict[str, Any]], str | None],
    on_first: Callable[[], None] | None = None,
) -> StreamResult:
    """POST `body` and read the event stream to `data: [DONE]`: `first` when the first
    non-empty text delta has been parsed, `done` when `[DONE]` has. Each event is parsed with
    `json.loads` on both sides."""
    result = StreamResult(status=0, started=time.perf_counter(), wall_started=time.time())
    try:
        async with client.stream("POST", url, json=body, headers=headers) as response:
            result.status = response.status_code
            result.marks["headers"] = time.perf_counter()
            result.thread_id = response.headers.get("x-thread-id")
            if response.status_code != 200:
                text = (await response.aread())[:300].decode(errors="replace")
                result.errors.append(f"HTTP {response.status_code}: {text}")
                return result
            buffer = b""
            async for raw in response.aiter_raw():
                result.body_bytes += len(raw)
                buffer += raw
                while (end := buffer.find(b"\n\n")) >= 0:
                    event, buffer = buffer[:end], buffer[end + 2 :]
                    if not event.startswith(b"data: "):
                        continue
                    payload = event[6:]
                    if payload == b"[DONE]":
                        result.done = time.perf_counter()
                        continue
                    parsed = json.loads(payload)
                    if "type" in parsed:
                        result.events.append(parsed["type"])
                        result.marks.setdefault(parsed["type"], time.perf_counter())
                    try:
                        piece = delta(parsed)
                    except _StreamError as error:
                        result.errors.append(f"error chunk: {error}")
                        continue
                    if piece:
                        result.last_delta = time.perf_counter()
                        if result.first is None:
                            result.first = time.perf_counter()
                            if on_first is not None:
                                on_first()
                        result.text.append(piece)
    except (httpx.HTTPError, ValueError) as error:
        result.errors.append(f"{type(error).__name__}: {error}")
    if result.status == 200 and result.done is None and not result.errors:
        result.errors.append("the stream ended without data: [DONE]")
    return result


def require(condition: bool, message: str) -> None:
    if not condition:
        raise BenchError(message)
