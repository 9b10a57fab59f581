"""Streaming chat through the platform against the provider called directly: the platform's
added time to first and last byte, concurrent streaming chats, server memory per open stream.

    .venv/bin/python bench/chat_stream.py [--rounds 3] [--requests 200] [--concurrency 100]

The phases, the targets and options: bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

import harness
import httpx
import psutil
from harness import BenchError, StreamResult, chat_body, fmt, percentile, read_stream
from harness import median as med
from scripted_provider import content_text

SECTION_TITLE = "Chat streaming: platform vs the provider directly, concurrency, memory"
MODEL = "scripted"
PACED_MODEL = "scripted-paced"
MEMORY_WARMUP = 5
ADDED_TARGET_MS = 10.0
PROMPT = "Tell me about streaming."
SYSTEM = "You are a helpful assistant.\n\nYour name is Scripted bench."
EXPECTED_ORDER = ["start", "start-step", "text-start", "text-delta", "text-end", "finish-step",
                  "finish"]  # fmt: skip
SIDES = ("direct", "platform")
LABELS = {"direct": "provider directly", "platform": "`POST /chat`"}


@dataclass
class Side:
    """Per-round figures of one side (direct or platform)."""

    first_p50: list[float] = field(default_factory=list)
    first_p99: list[float] = field(default_factory=list)
    last_p50: list[float] = field(default_factory=list)
    last_p99: list[float] = field(default_factory=list)

    def add(self, results: list[StreamResult]) -> None:
        firsts = [r.first_ms for r in results]
        lasts = [r.last_ms for r in results]
        self.first_p50.append(percentile(firsts, 50))
        self.first_p99.append(percentile(firsts, 99))
        self.last_p50.append(percentile(lasts, 50))
        self.last_p99.append(percentile(lasts, 99))

    def row(self, label: str, per_round: bool = False) -> str:
        """Its table row: the medians over the rounds (ms), or each round's figures."""
        figures = (self.first_p50, self.first_p99, self.last_p50, self.last_p99)
        cells = (fmt(x) if per_round else f"{med(x):.2f}" for x in figures)
        return f"| {label} | " + " | ".join(cells) + " |"


@dataclass
class Concurrent:
    errors: int
    error_samples: list[str]
    first_p50: float
    first_p99: float
    last_p50: float
    last_p99: float
    wall_s: float
    max_open_at_provider: int = 0


@dataclass
class MemoryRound:
    idle_rss: int
    open_rss: int
    pg_idle_rss: int
    pg_open_rss: int
    open_streams: int
    provider_open: int
    errors: int
    open_after_s: float

    @property
    def per_stream(self) -> float:
        return (self.open_rss - self.idle_rss) / self.open_streams


@dataclass
class Results:
    sequential: dict[str, Side] = field(
        default_factory=lambda: {"direct": Side(), "platform": Side()}
    )
    paced: dict[str, Side] = field(default_factory=lambda: {"direct": Side(), "platform": Side()})
    sequential_errors: dict[str, int] = field(default_factory=lambda: {"direct": 0, "platform": 0})
    body_bytes: dict[str, int] = field(default_factory=dict)
    stages: dict[str, list[float]] = field(default_factory=dict)
    concurrent: dict[str, list[Concurrent]] = field(
        default_factory=lambda: {"direct": [], "platform": []}
    )
    memory: list[MemoryRound] = field(default_factory=list)
    provider_stats: dict[str, Any] = field(default_factory=dict)
    users: int = 0
    # Per side, per mark: the round's median time from the request (ms).
    timeline: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    # Per sequential round: TCP connections the provider accepted, requests per side.
    connections: list[tuple[int, int]] = field(default_factory=list)

    def add_timeline(
        self, side: str, items: list[StreamResult], arrivals: list[float] | None = None
    ) -> None:
        marks: dict[str, list[float]] = {}
        for item in items:
            points = dict(item.marks)
            # Sequential requests: the one arrival at the provider inside this request.
            provider = harness.provider_ms(item, arrivals or [])
            if provider is not None:
                points["provider"] = item.started + provider / 1000
            if item.last_delta is not None:
                points["last text"] = item.last_delta
            if item.done is not None:
                points["[DONE]"] = item.done
            if item.first is not None:
                points["first text"] = item.first
            for name, at in points.items():
                marks.setdefault(name, []).append((at - item.started) * 1000)
        timeline = self.timeline.setdefault(side, {})
        for name, values in marks.items():
            timeline.setdefault(name, []).append(med(values))

    def added(self, metric: str, paced: bool = False) -> float:
        """Median over rounds of (platform p50 - direct p50), ms."""
        sides = self.paced if paced else self.sequential
        platform = getattr(sides["platform"], metric)
        direct = getattr(sides["direct"], metric)
        return med(p - d for p, d in zip(platform, direct, strict=True))


def openai_body(model: str = MODEL) -> dict[str, Any]:
    """What the platform's adapter sends for this agent (system turn, the member's message)."""
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": PROMPT},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 1024,
    }


class Bench:
    def __init__(self, args: argparse.Namespace, rig: harness.Rig) -> None:
        self.args = args
        self.rig = rig
        self.expected = content_text(args.tokens)
        self.titles = 0
        self.provider_port = harness.free_port()
        self.provider = rig.provider(args.tokens, port=self.provider_port)
        self.platform = self.start_platform()

    def start_provider(self, delay: float) -> None:
        """The provider again on the same port (serve's setting), with `delay`."""
        self.rig.stop(self.provider)
        self.provider = self.rig.provider(self.args.tokens, delay, self.provider_port)

    @property
    def provider_url(self) -> str:
        return self.provider.url

    def start_platform(self, name: str = "") -> harness.Platform:
        env = harness.scripted_env(self.provider_url, MODEL, self.args.log_level)
        platform = self.rig.serve(env, name=name)
        self.tokens = [
            platform.token(f"u{i}", "admin" if i == 0 else "member") for i in range(self.args.users)
        ]
        self.agent_id = platform.create_agent(
            self.tokens[0], {"name": "Scripted bench", "model": f"openai:{MODEL}"}
        )
        # Same system turn as the first agent's (the provider only looks at the model name).
        self.paced_agent_id = platform.create_agent(
            self.tokens[0], {"name": "Scripted bench", "model": f"openai:{PACED_MODEL}"}
        )
        return platform

    # one request -----------------------------------------------------------------------
    async def direct(
        self, client: httpx.AsyncClient, on_first: Any = None, paced: bool = False
    ) -> StreamResult:
        body = openai_body(PACED_MODEL if paced else MODEL)
        url = f"{self.provider_url}/v1/chat/completions"
        return await read_stream(client, url, body, {}, harness.openai_delta, on_first)

    async def via(
        self, client: httpx.AsyncClient, user: int = 0, on_first: Any = None, paced: bool = False
    ) -> StreamResult:
        self.titles += 1
        headers = harness.bearer(self.tokens[user])
        agent = self.paced_agent_id if paced else self.agent_id
        body = chat_body(agent, PROMPT, f"Bench chat {self.titles}")
        url = f"{self.platform.url}/chat"
        return await read_stream(client, url, body, headers, harness.ui_delta, on_first)

    def problem(self, result: StreamResult, side: str) -> str | None:
        trouble = result.problem(self.expected)
        return f"{side}: {trouble}" if trouble and result.ok else trouble

    def require(self, result: StreamResult, side: str) -> None:
        if trouble := self.problem(result, side):
            raise BenchError(f"{side}: {trouble}")

    # phases ------------------------------------------------------------------------------
    async def check(self, client: httpx.AsyncClient) -> None:
        """One chat of each kind, fully checked: the text and the platform's chunk order."""
        self.require(await self.direct(client), "direct")
        via = await self.via(client)
        self.require(via, "platform")
        collapsed = [e for i, e in enumerate(via.events) if i == 0 or via.events[i - 1] != e]
        if collapsed != EXPECTED_ORDER:
            raise BenchError(f"platform chunk order: {collapsed}")

    async def sequential(
        self, client: httpx.AsyncClient, results: Results, paced: bool = False
    ) -> None:
        args = self.args
        requests = args.paced_requests if paced else args.requests
        warmup = min(args.warmup, 5) if paced else args.warmup
        kind = "paced" if paced else "sequential"
        print(f"warm-up: {warmup} {kind} streams per side", flush=True)
        for _ in range(warmup):
            await self.direct(client, paced=paced)
            await self.via(client, paced=paced)
        sides = results.paced if paced else results.sequential
        suffix = "-paced" if paced else ""
        connections = (await self.provider_stats(client))["connections"]

        async def one(side: str) -> StreamResult:
            if side == "direct":
                return await self.direct(client, paced=paced)
            return await self.via(client, paced=paced)

        errors = results.sequential_errors
        async for r, got, _ in harness.paired_rounds(
            SIDES, args.rounds, requests, one, self.problem, errors
        ):
            arrivals = await harness.arrivals(client, self.provider_url)
            for side, items in got.items():
                if not items:
                    raise BenchError(f"no successful {side} stream in round {r + 1}")
                results.body_bytes[side] = items[-1].body_bytes
                sides[side].add(items)
                results.add_timeline(side + suffix, items, arrivals)
            d, p = sides["direct"], sides["platform"]
            if not paced:
                opened = (await self.provider_stats(client))["connections"] - connections
                results.connections.append((opened, requests))
                connections += opened
            print(
                f"round {r + 1} {kind}  direct first p50 {d.first_p50[-1]:.2f} ms last p50 "
                f"{d.last_p50[-1]:.2f} ms | platform first p50 {p.first_p50[-1]:.2f} ms last p50 "
                f"{p.last_p50[-1]:.2f} ms",
                flush=True,
            )

    async def stages(self, client: httpx.AsyncClient, results: Results) -> None:
        """Where the platform's time goes before the model: the HTTP floor, an authenticated
        read, and the send path alone (non-streaming mode, 202)."""
        url = self.platform.url
        auth = harness.bearer(self.tokens[0])
        n = self.args.stage_requests

        async def timed(method: str, path: str, status: int, **kw: Any) -> float:
            t0 = time.perf_counter()
            response = await client.request(method, url + path, **kw)
            elapsed = (time.perf_counter() - t0) * 1000
            if response.status_code != status:
                raise BenchError(f"{method} {path}: {response.status_code}")
            return elapsed

        for r in range(self.args.rounds):
            rows: dict[str, list[float]] = {"health": [], "agent": [], "send": []}
            for _ in range(n):
                rows["health"].append(await timed("GET", "/health", 200))
                rows["agent"].append(
                    await timed("GET", f"/agents?agentId={self.agent_id}", 200, headers=auth)
                )
                self.titles += 1
                body = chat_body(self.agent_id, PROMPT, f"Bench chat {self.titles}")
                headers = {**auth, "X-Stream-Response": "false"}
                rows["send"].append(await timed("POST", "/chat", 202, json=body, headers=headers))
                # Let the background answer (instant) finish before the next timed request.
                await asyncio.sleep(0.03)
            for name, values in rows.items():
                results.stages.setdefault(name, []).append(percentile(values, 50))
            print(
                f"round {r + 1} stages  health {results.stages['health'][-1]:.2f} ms  "
                f"agent {results.stages['agent'][-1]:.2f} ms  "
                f"send(202) {results.stages['send'][-1]:.2f} ms",
                flush=True,
            )

    async def concurrent(self, client: httpx.AsyncClient, results: Results) -> None:
        n = self.args.concurrency
        for r in range(self.args.rounds):
            for side in harness.alternate(SIDES, r):
                await self.reset_provider_stats(client)
                # A fresh client per round: n new connections on both sides, and no idle
                # keep-alive connection that the server may be closing as it is reused.
                async with harness.chat_client(n) as fresh:
                    t0 = time.perf_counter()
                    if side == "direct":
                        got = await asyncio.gather(*(self.direct(fresh) for _ in range(n)))
                    else:
                        got = await asyncio.gather(
                            *(self.via(fresh, user=i % len(self.tokens)) for i in range(n))
                        )
                    wall = time.perf_counter() - t0
                problems = [p for p in (self.problem(x, side) for x in got) if p]
                fine = [x for x in got if self.problem(x, side) is None]
                stats = await self.provider_stats(client)
                firsts = [x.first_ms for x in fine] or [float("nan")]
                lasts = [x.last_ms for x in fine] or [float("nan")]
                c = Concurrent(
                    errors=len(problems),
                    error_samples=sorted(set(problems))[:3],
                    first_p50=percentile(firsts, 50),
                    first_p99=percentile(firsts, 99),
                    last_p50=percentile(lasts, 50),
                    last_p99=percentile(lasts, 99),
                    wall_s=wall,
                    max_open_at_provider=int(stats.get("max_open", 0)),
                )
                results.concurrent[side].append(c)
                print(
                    f"round {r + 1} {n} concurrent {side:8}  errors {c.errors}  first p50 "
                    f"{c.first_p50:.1f} ms p99 {c.first_p99:.1f} ms  last p99 {c.last_p99:.1f} ms"
                    f"  wall {c.wall_s:.2f} s  provider max open {c.max_open_at_provider}",
                    flush=True,
                )
                if problems:
                    print(f"  errors: {c.error_samples}", flush=True)
                await asyncio.sleep(1.0)

    async def reset_provider_stats(self, client: httpx.AsyncClient) -> None:
        # `max_open` is a running maximum: start each phase from the streams open now.
        await client.get(f"{self.provider_url}/stats/reset")

    async def provider_stats(self, client: httpx.AsyncClient) -> dict[str, Any]:
        response = await client.get(f"{self.provider_url}/stats")
        stats: dict[str, Any] = response.json()
        return stats

    async def memory(self, client: httpx.AsyncClient, results: Results) -> None:
        """Each round on a fresh server, so that no earlier phase has already grown its heap
        (memory freed by Python is kept and reused, not returned)."""
        n = self.args.open_streams
        for r in range(self.args.rounds):
            self.rig.stop(self.platform)
            self.platform = self.start_platform(f"memory-{r + 1}")
            for _ in range(MEMORY_WARMUP):
                warm = await self.via(client, paced=True)
                if self.problem(warm, "platform"):
                    raise BenchError(f"warm-up: {warm.errors}")
            serve = psutil.Process(self.platform.process.popen.pid)
            pg_pid, _ = harness.postmaster(self.platform.pgdata)
            await asyncio.sleep(2.0)
            idle = await harness.sample_rss(serve)
            pg_idle = harness.tree_pss(pg_pid)
            opened = asyncio.Event()
            count = 0

            def first(opened: asyncio.Event = opened) -> None:
                nonlocal count
                count += 1
                if count == n:
                    opened.set()

            t0 = time.perf_counter()
            tasks = [
                asyncio.ensure_future(self.via(client, user=i % len(self.tokens), on_first=first))
                for i in range(n)
            ]
            try:
                await asyncio.wait_for(opened.wait(), timeout=60)
            except TimeoutError:
                raise BenchError(f"only {count} of {n} streams started within 60 s") from None
            open_after = time.perf_counter() - t0
            await asyncio.sleep(1.0)
            still_open = sum(1 for t in tasks if not t.done())
            stats = await self.provider_stats(client)
            with_open = await harness.sample_rss(serve)
            pg_open = harness.tree_pss(pg_pid)
            got = await asyncio.gather(*tasks)
            errors = sum(1 for x in got if self.problem(x, "platform"))
            provider_open = int(stats["open"])
            m = MemoryRound(
                idle, with_open, pg_idle, pg_open, still_open, provider_open, errors, open_after
            )
            results.memory.append(m)
            print(
                f"round {r + 1} memory  serve RSS idle {idle / 2**20:.1f} MiB, {still_open} open "
                f"{with_open / 2**20:.1f} MiB: {m.per_stream / 1024:.1f} KiB per stream; "
                f"PostgreSQL {pg_idle / 2**20:.0f} -> {pg_open / 2**20:.0f} MiB; errors {errors}",
                flush=True,
            )
            if still_open != n:
                raise BenchError(f"only {still_open} of {n} streams were still open")

    async def run(self, results: Results) -> None:
        async with harness.chat_client(1000) as client:
            await self.check(client)
            await self.sequential(client, results)
            if self.args.paced_requests:
                await self.sequential(client, results, paced=True)
            await self.stages(client, results)
            await self.concurrent(client, results)
            results.provider_stats = await self.provider_stats(client)
        if self.args.open_streams:
            self.start_provider(self.args.delay)
            async with harness.chat_client(1000) as client:
                await self.memory(client, results)


def diagnosis(results: Results) -> list[str]:
    """What the timeline and the stage requests say about the added time."""
    t = {side: {k: med(v) for k, v in marks.items()} for side, marks in results.timeline.items()}
    st = {k: med(v) for k, v in results.stages.items()}
    p, d = t.get("platform", {}), t.get("direct", {})
    notes = []
    if {"headers", "provider", "first text", "last text", "[DONE]"} <= p.keys() and st:
        notes.append(
            f"- Before the first byte: the response headers come {p['headers']:.1f} ms after the "
            f"request (direct: {d.get('headers', 0):.1f} ms); the send path alone (`POST /chat` "
            f"with `X-Stream-Response: false`) takes {st['send']:.1f} ms at p50 against "
            f"{st['health']:.1f} ms for `GET /health` and {st['agent']:.1f} ms for an "
            f"authenticated one-row read: about {st['send'] - st['agent']:.1f} ms of database "
            "write and task start before the model is called."
        )
        notes.append(
            f"- Instant provider: the provider has read the platform's request at "
            f"{p['provider']:.1f} ms; the first `text-delta` reaches the client at "
            f"{p['first text']:.1f} ms and the last at {p['last text']:.1f} ms (direct: the "
            f"first delta {d.get('first text', 0) - d.get('provider', 0):.1f} ms and the last "
            f"{d.get('last text', 0) - d.get('provider', 0):.1f} ms after the provider read the "
            f"request). Relaying the 200 deltas takes the platform "
            f"{p['last text'] - p['first text']:.1f} ms (httpx reading each HTTP chunk of the "
            "provider's body, parsing each event, building and keeping the chunk, encoding and "
            "writing the merged events), then `text-end` comes "
            f"{p.get('text-end', 0) - p['last text']:.1f} ms and `[DONE]` "
            f"{p['[DONE]'] - p.get('finish', 0):.1f} ms after `finish`."
        )
    if {"provider", "first text", "last text"} <= t.get("platform-paced", {}).keys():
        pp, dp = t["platform-paced"], t.get("direct-paced", {})
        notes.append(
            f"- Paced provider (1 ms between deltas): the first `text-delta` reaches the client "
            f"{pp['first text'] - pp['provider']:.1f} ms after the provider read the request "
            f"(direct: {dp.get('first text', 0) - dp.get('provider', 0):.1f} ms), so the added "
            f"time to first byte is mostly the send path. The last delta comes "
            f"{pp['last text'] - pp['provider']:.1f} ms after the provider read the request "
            f"(direct: {dp.get('last text', 0) - dp.get('provider', 0):.1f} ms): the platform "
            "falls behind while relaying (per delta: the adapter's parsing, chunk building, "
            "the SSE encoding and writing, plus a run-log store every 150 ms awaited inside the "
            "generation loop). After the last delta, `text-end` needs "
            f"{pp.get('text-end', 0) - pp['last text']:.1f} ms (the provider's closing chunks; "
            "the usage ledger is written after the stream) and `[DONE]` another "
            f"{pp.get('[DONE]', 0) - pp.get('finish', 0):.1f} ms after `finish` (the final store)."
        )
    return notes


def section(results: Results, args: argparse.Namespace, info: dict[str, str]) -> tuple[str, bool]:
    seq = results.sequential
    added_first = results.added("first_p50")
    added_last = results.added("last_p50")
    conc = results.concurrent["platform"]
    conc_errors = sum(c.errors for c in conc)
    ok = added_first < ADDED_TARGET_MS and added_last < ADDED_TARGET_MS and conc_errors == 0
    ok = ok and sum(results.sequential_errors.values()) == 0
    verdict = harness.verdict
    lines = [
        *harness.heading(SECTION_TITLE, "chat_stream.py"),
        f"- Machine: {harness.machine_line(info)}. The platform, its PostgreSQL, the scripted "
        "provider and the client share these CPUs.",
        f"- Provider: `bench/scripted_provider.py`, raw asyncio streams on uvloop in its own "
        f"process on loopback: `POST /v1/chat/completions` with `stream: true` answers a role "
        f"chunk, {args.tokens} content-delta chunks, a stop chunk, a usage chunk "
        "(`stream_options.include_usage`) and `data: [DONE]`, written at once (chunked "
        "transfer encoding, keep-alive).",
        "- Platform: `agent-platform serve` (one uvicorn worker on uvloop, litestar "
        f"{version('litestar')}, httpx {version('httpx')} to the provider) on a temporary data dir "
        "(embedded PostgreSQL), `AP_OPENAI_BASE_URL` at the scripted provider, "
        f"`AP_LOG_LEVEL={args.log_level}`, one agent on `openai:{MODEL}` without knowledge bases. "
        "Every chat is a new conversation with a supplied `title` (so no title-generation job "
        "runs); the platform stores the conversation, the user message and the run (one statement) "
        "before the stream starts, stores chunks every 150 ms as they come and the whole message "
        "at the end, before `[DONE]` (run-log commits do not wait for the WAL flush). Live readers "
        "get the first words at once, then merged batches at most every 50 ms, and the end at "
        "once.",
        "- Client: one httpx AsyncClient (keep-alive) in the driver process for both sides; "
        "each event is split on the blank line and parsed with `json.loads` on both sides. "
        "*first* = the first non-empty content delta parsed (direct: `choices[0].delta.content`;"
        " platform: a `text-delta` chunk), *last* = `data: [DONE]` parsed, both from just "
        "before the request is sent. Every answer is checked: the assembled text equals the "
        "scripted text and (once) the platform's chunk order is `start`, `start-step`, "
        "`text-start`, `text-delta`..., `text-end`, `finish-step`, `finish`.",
        f"- Sequential: {args.warmup} warm-up streams per side, then {args.rounds} rounds of "
        f"{args.requests} requests per side, alternating direct and platform one by one (the first "
        "of each pair alternates too); p50/p99 nearest rank per round, the tables show medians "
        "over the rounds. Added = platform p50 - direct p50 in the same round, median over rounds. "
        f"Response bodies: direct {results.body_bytes.get('direct', 0) / 1024:.1f} KiB, platform "
        f"{results.body_bytes.get('platform', 0) / 1024:.1f} KiB.",
        f"- Paced (diagnostic, not the target): a second agent on `openai:{PACED_MODEL}`, for "
        "which the provider sleeps 1 ms (`asyncio.sleep`, about 1.1 ms on uvloop) before each "
        "of the 200 deltas, as a fast real model would stream; "
        f"{args.paced_requests} requests per side per round, interleaved the same way.",
        "",
        "| Sequential streams | first p50 (ms) | first p99 (ms) | last p50 (ms) | last p99 (ms) |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [seq[side].row(LABELS[side]) for side in SIDES]
    lines.append(f"| added by the platform | {added_first:.2f} | | {added_last:.2f} | |")
    if results.paced["direct"].first_p50:
        lines.append(results.paced["direct"].row("paced (1 ms between deltas): provider directly"))
        lines.append(results.paced["platform"].row("paced: `POST /chat`"))
        lines.append(
            f"| paced: added by the platform | {results.added('first_p50', paced=True):.2f} | | "
            f"{results.added('last_p50', paced=True):.2f} | |"
        )
    lines += [
        "",
        f"{args.concurrency} concurrent streams ({args.rounds} rounds, each side with a fresh "
        "client, so each request opens its own connection, direct and platform "
        f"alternating which goes first; platform chats as {results.users} members round-robin,"
        " each a new conversation):",
        "",
        "| Concurrent streams | errors (all rounds) | first p50 (ms) | first p99 (ms) | "
        "last p50 (ms) | last p99 (ms) | wall (s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for side, label in LABELS.items():
        cs = results.concurrent[side]
        lines.append(
            f"| {label} | {sum(c.errors for c in cs)} | {med([c.first_p50 for c in cs]):.1f} | "
            f"{med([c.first_p99 for c in cs]):.1f} | {med([c.last_p50 for c in cs]):.1f} | "
            f"{med([c.last_p99 for c in cs]):.1f} | {med([c.wall_s for c in cs]):.2f} |"
        )
    if results.memory:
        mem = results.memory
        per_stream = med([m.per_stream for m in mem])
        lines += [
            "",
            f"Memory: the provider restarted with `--delay {args.delay:g}` (a delta every "
            f"{args.delay * 1000:.0f} ms, {args.tokens * args.delay:.0f} s per answer); "
            f"{args.open_streams} `POST /chat` streams started at once; once every one had "
            "received its first `text-delta`, 1 s later, the serve process's RSS (psutil, the "
            "process alone: children excluded; the embedded PostgreSQL is a separate process "
            "tree, reported as the sum of its processes' PSS) is the median of 5 samples over "
            f"1 s; idle = the same, 2 s before, after {MEMORY_WARMUP} warm-up chats. Each round "
            "runs on a fresh `agent-platform serve` (its own data dir and embedded PostgreSQL), "
            "because memory a process has once used stays in its allocator and would hide the "
            "cost in later rounds. Per stream = (open - idle) / open streams.",
            "",
            "| Round | serve RSS idle (MiB) | with N open (MiB) | N open (client / at provider) "
            "| per stream (KiB) | PostgreSQL PSS idle -> open (MiB) | all N open after (s) | "
            "errors |",
            "|---|---:|---:|---|---:|---|---:|---:|",
        ]
        for i, m in enumerate(mem):
            lines.append(
                f"| {i + 1} | {m.idle_rss / 2**20:.1f} | {m.open_rss / 2**20:.1f} | "
                f"{m.open_streams} / {m.provider_open} | {m.per_stream / 1024:.1f} | "
                f"{m.pg_idle_rss / 2**20:.0f} -> {m.pg_open_rss / 2**20:.0f} | "
                f"{m.open_after_s:.2f} | {m.errors} |"
            )
        lines.append(f"| median | | | | {per_stream / 1024:.1f} | | | |")
    lines += [
        "",
        "| Target | Measured | Result |",
        "|---|---:|---|",
        f"| added time to first byte at p50 < {ADDED_TARGET_MS:g} ms | {added_first:.2f} ms | "
        f"{verdict(added_first < ADDED_TARGET_MS)} |",
        f"| added time to last byte at p50 < {ADDED_TARGET_MS:g} ms | {added_last:.2f} ms | "
        f"{verdict(added_last < ADDED_TARGET_MS)} |",
        f"| {args.concurrency} concurrent streaming chats: no errors | {conc_errors} errors | "
        f"{verdict(conc_errors == 0)} |",
        f"| p99 time to first byte, {args.concurrency} concurrent | "
        f"{med([c.first_p99 for c in conc]):.1f} ms | reported |",
    ]
    if results.memory:
        lines.append(
            "| server memory per open stream | "
            f"{med([m.per_stream for m in results.memory]) / 1024:.1f} KiB | reported |"
        )
    lines += [
        "",
        "Per round (sequential, ms):",
        "",
        "| Side | first p50 | first p99 | last p50 | last p99 |",
        "|---|---|---|---|---|",
        *(seq[side].row(side, per_round=True) for side in SIDES),
    ]
    timeline_order = [
        ("headers", "response headers"),
        ("start", "`start`"),
        ("start-step", "`start-step`"),
        ("provider", "the provider has read the request (its clock)"),
        ("first text", "first text delta"),
        ("last text", "last text delta"),
        ("text-end", "`text-end`"),
        ("finish-step", "`finish-step`"),
        ("finish", "`finish`"),
        ("[DONE]", "`data: [DONE]`"),
    ]
    lines += [
        "",
        "Timeline of a sequential stream (ms from sending the request, when the client parsed "
        "each; median per round, then median over rounds):",
        "",
        "| Point | provider directly | `POST /chat` | paced: directly | paced: `POST /chat` |",
        "|---|---:|---:|---:|---:|",
    ]
    for key, label in timeline_order:
        cells = []
        for side in ("direct", "platform", "direct-paced", "platform-paced"):
            values = results.timeline.get(side, {}).get(key)
            cells.append(f"{med(values):.2f}" if values else "-")
        lines.append(f"| {label} | {' | '.join(cells)} |")
    st = results.stages
    lines += [
        "",
        f"Where the platform's time goes before the model ({args.stage_requests} sequential "
        "requests of each per round, p50 per round):",
        "",
        "| Request | p50 per round (ms) | what it covers |",
        "|---|---|---|",
        f"| `GET /health` | {fmt(st['health'])} | HTTP round trip, middleware, access log |",
        f"| `GET /agents?agentId=` | {fmt(st['agent'])} | + bearer token, request container, "
        "an organization-scoped connection and one read |",
        f"| `POST /chat`, `X-Stream-Response: false` (202) | {fmt(st['send'])} | + the send "
        "path: validation, agent read, the conversation, its message and run in one statement, "
        "background task spawned |",
    ]
    errs = results.sequential_errors
    notes = [
        "",
        "Notes:",
        "",
        f"- Sequential errors: direct {errs['direct']}, platform {errs['platform']}. Provider "
        f"totals for the instant phases: {results.provider_stats.get('streaming', 0)} streaming "
        f"requests, {results.provider_stats.get('with_usage', 0)} with "
        f"`stream_options.include_usage`, models {results.provider_stats.get('models', {})}, over "
        f"{results.provider_stats.get('connections', 0)} TCP connections (the direct client's and "
        "the platform's together).",
        "- TCP connections accepted by the provider during the sequential rounds (the "
        "client keeps one alive for the direct side): "
        + ", ".join(f"{c} for {n} direct + {n} platform requests" for c, n in results.connections)
        + (
            ". The platform opens a new connection for nearly every call to the provider: its "
            "adapter stops reading at `data: [DONE]` and closes the response before the chunked "
            "body's terminating chunk is read, so httpx drops the connection instead of "
            "returning it to the pool (on loopback a handshake is cheap; to a remote HTTPS "
            "provider it is a TCP and TLS handshake per call)."
            if results.connections and results.connections[0][0] > results.connections[0][1] / 2
            else ": the platform's connections to the provider are reused."
        ),
        *diagnosis(results),
        "- The direct side is the floor: the same client, the same loopback and a provider "
        "that takes no time, so *added* is the platform's whole cost (HTTP, auth, database "
        "writes before the first byte and before `[DONE]`, re-encoding each delta) and not a "
        "share of a real model's latency.",
        "- With a real model the first token takes tens to hundreds of milliseconds and tokens "
        "come every 10-50 ms, so the added time is a smaller share; the scripted provider "
        "measures it with nothing to hide it.",
    ]
    for c in conc:
        for sample in c.error_samples:
            notes.append(f"- Concurrent error sample: {sample}")
    lines += notes
    lines.append("")
    return "\n".join(lines), ok


def run(args: argparse.Namespace, info: dict[str, str]) -> tuple[str, bool]:
    results = Results(users=args.users)
    with harness.Rig("ap-chat-bench-") as rig:
        asyncio.run(Bench(args, rig).run(results))
    return section(results, args, info)


def main() -> int:
    parser = harness.parser(__doc__, provider=True, rounds=3, requests=200, warmup=20)
    parser.add_argument("--stage-requests", type=int, default=50)
    parser.add_argument(
        "--paced-requests", type=int, default=50, help="per side per round with 1 ms between deltas"
    )
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--users", type=int, default=4, help="members chatting (round-robin)")
    parser.add_argument("--open-streams", type=int, default=100, help="0 skips the memory part")
    parser.add_argument("--delay", type=float, default=0.1, help="provider delay per delta (s)")
    return harness.run(SECTION_TITLE, parser.parse_args(), run)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
