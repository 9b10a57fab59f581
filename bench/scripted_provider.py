"""A scripted OpenAI-compatible chat provider for the chat benchmarks: raw asyncio streams, one
process, HTTP/1.1 with keep-alive.

    .venv/bin/python bench/scripted_provider.py --port 8100 [--tokens 200] [--delay 0]

`POST /v1/chat/completions` (any model name) with `"stream": true` answers at once with a
role chunk, `--tokens` content-delta chunks (" w0", " w1", ...), a chunk with
`finish_reason: "stop"`, a usage chunk when the request asked for it
(`stream_options.include_usage`), then `data: [DONE]`, chunked like OpenAI's own answers.
With `--delay S` it sleeps S seconds before each content chunk, so streams stay open; a model
whose name ends in `-paced` gets `--paced-delay` (1 ms) between chunks instead, like a fast real
model. Without
`stream` it answers one `chat.completion` body. `GET /stats` returns the requests and
connections counted so far (JSON; `/stats/reset` first sets `max_open` back to the streams
open now), `GET /arrivals` the wall-clock times completion requests arrived (body read),
`GET /health` 200. It prints `ready <port>` once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import deque
from typing import Any

MODEL_TEXT_PREFIX = " w"


def content_text(tokens: int) -> str:
    """The answer's whole text, as a client assembles it from the deltas."""
    return "".join(f"{MODEL_TEXT_PREFIX}{i}" for i in range(tokens))


class Provider:
    def __init__(self, tokens: int, delay: float, paced_delay: float) -> None:
        self.tokens = tokens
        self.delay = delay
        self.paced_delay = paced_delay
        self.stats: dict[str, Any] = {
            "requests": 0,
            "streaming": 0,
            "with_usage": 0,
            "open": 0,
            "max_open": 0,
            "models": {},
            "connections": 0,
        }
        # Wall-clock arrival of each completion request (body read), for the client's timeline.
        self.arrivals: deque[float] = deque(maxlen=20_000)

    def events(self, model: str, usage: bool) -> tuple[bytes, list[bytes], bytes]:
        """Head (role chunk), one event per content delta, tail (stop, usage, DONE): each an
        HTTP chunk."""
        base = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }

        def event(payload: dict[str, Any]) -> bytes:
            return b"data: " + json.dumps({**base, **payload}).encode() + b"\n\n"

        def choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        head = event(choice({"role": "assistant", "content": ""}))
        deltas = [event(choice({"content": f"{MODEL_TEXT_PREFIX}{i}"})) for i in range(self.tokens)]
        tail = event(choice({}, "stop"))
        if usage:
            tail += event(
                {
                    "choices": [],
                    "usage": {
                        "prompt_tokens": 20,
                        "completion_tokens": self.tokens,
                        "total_tokens": 20 + self.tokens,
                    },
                }
            )
        tail += b"data: [DONE]\n\n"
        return _chunk(head), [_chunk(d) for d in deltas], _chunk(tail) + b"0\r\n\r\n"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats["connections"] += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                if method == "POST" and path.endswith("/chat/completions"):
                    self.arrivals.append(time.time())
                if method == "GET" and path == "/arrivals":
                    await self.plain(writer, 200, json.dumps(list(self.arrivals)).encode())
                elif method == "GET" and path in ("/stats", "/stats/reset"):
                    if path == "/stats/reset":
                        self.stats["max_open"] = self.stats["open"]
                    await self.plain(writer, 200, json.dumps(self.stats).encode())
                elif method == "GET" and path == "/health":
                    await self.plain(writer, 200, b'{"ok":true}')
                elif method == "POST" and path.endswith("/chat/completions"):
                    await self.completion(writer, json.loads(body or b"{}"))
                else:
                    await self.plain(writer, 404, b'{"error":{"message":"not found"}}')
                if headers.get("connection", "").lower() == "close":
                    return
        except ConnectionError:
            return
        finally:
            writer.close()

    async def plain(self, writer: asyncio.StreamWriter, status: int, body: bytes) -> None:
        reason = "OK" if status == 200 else "Not Found"
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()

    async def completion(self, writer: asyncio.StreamWriter, request: dict[str, Any]) -> None:
        stats = self.stats
        model = str(request.get("model", ""))
        stats["requests"] += 1
        stats["models"][model] = stats["models"].get(model, 0) + 1
        if not request.get("stream"):
            text = content_text(self.tokens)
            body = json.dumps(
                {
                    "id": "chatcmpl-scripted",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": 20,
                        "completion_tokens": self.tokens,
                        "total_tokens": 20 + self.tokens,
                    },
                }
            ).encode()
            await self.plain(writer, 200, body)
            return
        usage = bool((request.get("stream_options") or {}).get("include_usage"))
        stats["streaming"] += 1
        stats["with_usage"] += usage
        head, deltas, tail = self.events(model, usage)
        stats["open"] += 1
        stats["max_open"] = max(stats["max_open"], stats["open"])
        try:
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n" + head
            )
            delay = self.paced_delay if model.endswith("-paced") else self.delay
            if delay <= 0:
                writer.write(b"".join(deltas) + tail)
            else:
                await writer.drain()
                for delta in deltas:
                    await asyncio.sleep(delay)
                    writer.write(delta)
                    await writer.drain()
                writer.write(tail)
            await writer.drain()
        finally:
            stats["open"] -= 1


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def serve(port: int, tokens: int, delay: float, paced_delay: float) -> None:
    provider = Provider(tokens, delay, paced_delay)
    server = await asyncio.start_server(provider.handle, "127.0.0.1", port, backlog=1024)
    print(f"ready {port}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each delta")
    parser.add_argument("--paced-delay", type=float, default=0.001, help="for `*-paced` models")
    args = parser.parse_args()
    try:
        # uvloop when present: the provider must not be the bottleneck.
        import uvloop

        uvloop.run(serve(args.port, args.tokens, args.delay, args.paced_delay))
    except ImportError:
        asyncio.run(serve(args.port, args.tokens, args.delay, args.paced_delay))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
