"""The service the console talks to in the browser tests: a real `serve` (tests/e2e/serving.py)
whose chat and embedding models are a scripted OpenAI-compatible provider on loopback.

The provider picks its answer by what it is asked: a title request (the title generator's
instruction) gets a fixed title, an embedding request hashed vectors, and a chat request the
`Plan` whose key the conversation's first user message contains (the default answer when none
does). A plan is one script per model call of the answer (the first call, then the one after
each tool result); a script is bytes to send or a float to pause, watching whether the service
hung up, as `ScriptedServer` does."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from adapters.identity.dev_provider import DevIdentityProvider
from tests.e2e.serving import Server
from tests.integration.test_chat_model_openai import (
    ScriptedServer,
    on_a_thread,
    sse_delta,
    sse_head,
)

CHAT_MODEL = "openai:scripted"
EMBEDDING_MODEL = "openai:text-embedding-3-small"
"""A listed model, so a knowledge base created without `embeddingDimensions` gets 1536."""
EMBEDDING_DIMENSIONS = 1536
TITLE = "Scripted title"
DEFAULT_ANSWER = "Hello from the scripted model."
TITLE_INSTRUCTION = "You name chat conversations"

Script = list[bytes | float]


def text_script(text: str, *, pieces: int = 1, pause: float = 0.0) -> Script:
    """`text` streamed in `pieces` deltas, `pause` seconds before each, then `stop`."""
    size = max(1, math.ceil(len(text) / pieces))
    script: Script = [sse_head()]
    for start in range(0, len(text), size):
        if pause:
            script.append(pause)
        script.append(sse_delta(text[start : start + size]))
    script.append(sse_delta(finish="stop"))
    return script


def tool_call_script(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> Script:
    """One tool call, in two fragments as providers send them, then `tool_calls`."""
    encoded = json.dumps(arguments)
    half = len(encoded) // 2
    first = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": encoded[:half]},
    }
    second = {"index": 0, "function": {"arguments": encoded[half:]}}
    return [
        sse_head(),
        _chunk({"role": "assistant", "tool_calls": [first]}),
        _chunk({"tool_calls": [second]}),
        sse_delta(finish="tool_calls"),
    ]


def _chunk(delta: dict[str, Any]) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


def hashed(text: str) -> list[float]:
    """A unit vector from the words of `text`: texts sharing words are near."""
    vector = [0.0] * EMBEDDING_DIMENSIONS
    for word in text.lower().split():
        digest = hashlib.sha256(word.strip(".,:;!?#*|`").encode()).digest()
        vector[int.from_bytes(digest[:4]) % EMBEDDING_DIMENSIONS] += 1.0
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector] if norm else [1.0] + [0.0] * (EMBEDDING_DIMENSIONS - 1)


@dataclass
class Plan:
    scripts: list[Script]
    requests: list[dict[str, Any]] = field(default_factory=list)
    hung_up: bool = False
    """Whether the service hung up during a pause (an answer stopped mid-way)."""


class ScriptedProvider(ScriptedServer):
    """An OpenAI-compatible chat and embedding provider; see the module's docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.plans: dict[str, Plan] = {}

    def plan(self, key: str, *scripts: Script) -> Plan:
        """Answers to a conversation whose first message contains `key`."""
        self.plans[key] = Plan(list(scripts))
        return self.plans[key]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            body = json.loads(await reader.readexactly(length))
            path = head.split(b" ", 2)[1].decode()
            if path.endswith("/embeddings"):
                writer.write(_json_response(self._embeddings(body)))
            elif path.endswith("/chat/completions"):
                await self._chat(body, reader, writer)
            else:
                writer.write(_json_response({"error": {"message": "not found"}}, "404 Not Found"))
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    @staticmethod
    def _embeddings(body: dict[str, Any]) -> dict[str, Any]:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [
            {"object": "embedding", "index": i, "embedding": hashed(str(text))}
            for i, text in enumerate(texts)
        ]
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        return {"object": "list", "data": data, "model": body.get("model"), "usage": usage}

    async def _chat(
        self, body: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        messages = body.get("messages") or []
        system = " ".join(str(m.get("content")) for m in messages if m.get("role") == "system")
        if TITLE_INSTRUCTION in system:
            script, plan = text_script(TITLE), None
        else:
            first = next((_text(m) for m in messages if m.get("role") == "user"), "")
            plan = next((p for key, p in self.plans.items() if key in first), None)
            if plan is None:
                script = text_script(DEFAULT_ANSWER)
            else:
                plan.requests.append(body)
                turn = sum(1 for m in messages if m.get("role") == "tool")
                script = plan.scripts[min(turn, len(plan.scripts) - 1)]
        if not body.get("stream"):
            writer.write(_json_response(_whole(script)))
            return
        for part in script:
            if isinstance(part, float):
                try:
                    if await asyncio.wait_for(reader.read(1), part) == b"":
                        if plan is not None:
                            plan.hung_up = True
                        return
                except TimeoutError:
                    pass
            else:
                writer.write(part)
                await writer.drain()


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def _whole(script: Script) -> dict[str, Any]:
    """A streamed text script as one `chat.completion` (for a caller that does not stream)."""
    text = ""
    for part in script:
        if isinstance(part, bytes) and part.startswith(b"data: "):
            chunk = json.loads(part.removeprefix(b"data: "))
            text += chunk["choices"][0]["delta"].get("content", "")
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "scripted",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _json_response(payload: dict[str, Any], status: str = "200 OK") -> bytes:
    data = json.dumps(payload).encode()
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(data)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + data


class Console:
    """A running `serve` with the scripted provider, and what the tests need of it."""

    def __init__(self, server: Server, provider: ScriptedProvider) -> None:
        self.server = server
        self.provider = provider
        self.base = server.base
        self.url = f"{server.base}/console/"
        key = Path(server.env["AP_DATA_DIR"]).resolve() / "dev-idp" / "signing-key.pem"
        self._issuer = DevIdentityProvider(key)

    def token(self, org: str, user: str = "u_console", role: str = "admin") -> str:
        """A development bearer token (what `agent-platform token` prints), minted in-process
        with the key `serve` signs with."""
        return self._issuer.issue(user_id=user, org_id=org, role=role)

    def handoff(self, token: str, path: str = "") -> str:
        """The console's address that signs in with `token` (the contract's hand-off)."""
        return f"{self.url}{path}#access_token={token}"

    def api(self, token: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.base, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )


@dataclass
class KnowledgeFile:
    kb_id: int
    file_id: int
    name: str


def upload(api: httpx.Client, kb_id: int, name: str, data: bytes, content_type: str) -> int:
    """A file put into a knowledge base through the API (presign, PUT, associate): its id."""
    presigned = api.post(
        "/upload/presigned",
        json={"fileName": name, "contentType": content_type, "fileSize": len(data)},
    )
    assert presigned.status_code == 200, presigned.text
    upload = presigned.json()
    put = httpx.put(upload["uploadUrl"], content=data, headers=upload["headers"], timeout=30)
    assert put.status_code in (200, 201, 204), put.text
    associated = api.post(
        "/kb/files",
        json={
            "kbId": kb_id,
            "fileId": upload["fileId"],
            "fileName": name,
            "fileKey": upload["fileKey"],
            "contentKey": upload["contentKey"],
            "contentType": content_type,
            "fileSize": len(data),
        },
    )
    assert associated.status_code == 201, associated.text
    return int(associated.json()["file"]["id"])


def wait_for_files(api: httpx.Client, kb_id: int, within: float = 60) -> list[dict[str, Any]]:
    """The knowledge base's files once none is still being processed."""
    deadline = time.monotonic() + within
    while True:
        files = api.get("/kb/files", params={"kbId": kb_id}).json()["files"]
        if all(f["processingStatus"] in TERMINAL for f in files):
            return files
        assert time.monotonic() < deadline, f"files still processing: {files}"
        time.sleep(0.3)


TERMINAL = {"completed", "parse_failed", "chunk_failed", "extract_failed"}


def running_console(data_dir: Path, env: dict[str, str] | None = None) -> Iterator[Console]:
    """`serve` with the scripted provider as its default chat and embedding model; `env` adds
    to its environment."""
    with on_a_thread(ScriptedProvider()) as provider:
        server = Server(
            data_dir,
            {
                "AP_OPENAI_BASE_URL": provider.url,
                "AP_OPENAI_API_KEY": "sk-scripted",
                "AP_DEFAULT_CHAT_MODEL": CHAT_MODEL,
                "AP_DEFAULT_EMBEDDING_MODEL": EMBEDDING_MODEL,
                **(env or {}),
            },
        )
        for name in ("AP_PUBLIC_URL", "AP_AUTH_JWKS_URL", "AP_AUTH_ISSUER", "AP_DATABASE_URL"):
            server.env.pop(name, None)
        server.start()
        try:
            yield Console(server, provider)
        finally:
            if server.process is not None:
                server.stop()
