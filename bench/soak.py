"""Load and soak: a mixed workload against `agent-platform serve` (with its worker child) for
`--seconds` seconds, watching for errors and for what grows.

    .venv/bin/python bench/soak.py [--seconds 600] [--clients 8] [--warmup S]

The workload, what counts as an error, when and what it measures, the targets and options:
bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import asyncpg
import harness
import httpx
import psutil
from corpus import TOPICS, markdown_note, sentence
from harness import (
    BenchError,
    Platform,
    chat_body,
    expect,
    percentile,
    read_stream,
    ui_delta,
    verdict,
)
from scripted_provider import content_text

SATURATION_BURSTS = 3
SATURATION_REQUESTS = 48  # more than serve's main pool (20)
SATURATION_CHATS = 12  # more than the usage ledger's pool (4)
SATURATION_FILES = 4  # more than the worker's jobs at once (AP_WORKER_CONCURRENCY, 2)

SECTION_TITLE = "Load and soak: a mixed workload on serve and its worker"
ORG_ID = "org_soak"
ADMIN = "user_soak_admin"
MODEL = "scripted-paced"  # 1 ms between the provider's deltas: streams last a moment
KB_COUNT = 3
RSS_TARGET = 0.10
# What earlier runs found, kept in the section (figures from those runs).
HISTORY = [
    "- First run (2026-11-23 16:35 UTC, same command, before the change below): RSS of serve + "
    "children 951.5 -> 1098.2 MiB (+15.4%, FAIL): serve 197.3 -> 200.8 MiB (+1.8%), the "
    "worker 697.7 -> 784.3 MiB (+12.4%, rising steadily under load, about 10 MiB a minute, "
    "228 files), and a second `adapters.extraction.sandbox` child (+56.6 MiB: the worker "
    "runs 2 jobs at once and keeps up to one extraction child per job, replaced after 200 "
    "files; bounded). The worker's growth was heap that glibc had freed but kept: the "
    "service's extractor, chunker and local embedder run in-process on 250 generated files "
    "went 636 -> 730 MiB while `tracemalloc` saw the Python heap grow by ~80 KiB, and "
    "`malloc_trim(0)` took it back to 640 MiB (`MALLOC_ARENA_MAX=2`: 745 -> 641 MiB, no "
    "help); in a live worker during a later run, `malloc_trim(0)` through gdb took its RSS "
    "from 811 to 717 MiB. Change (`src/adapters/embeddings/local.py`): the local embedder's "
    "encoder thread calls glibc's `malloc_trim(0)` when it runs out of work and at most once "
    "a second while busy (1.6 ms p50, 7.6 ms max a call measured in-process; a busy worker "
    "is never idle, so a trim only on idle was not enough). In-process with 3 jobs at once "
    "over 300 files: 663 -> 688 MiB with it, 694 -> 749 MiB without.",
    "- Database connections and serve's fds: the first runs ended with 1-3 more than after the "
    "warm-up, every one idle, last statement asyncpg's pool reset, and serve's extra fds the "
    "Unix sockets of those same connections: a pool opens another connection at a new peak of "
    "concurrent use and keeps it up to 300 s unused. The bench now saturates the pools before "
    "the load (48 listings and 12 chats at once, 3 times, and 4 files at once), so the warm-up "
    "reading is their high-water mark and the pools may only give back (connections unused for "
    "300 s are closed): the targets read no more fds or connections at the end than after the "
    "warm-up. RSS of serve + children counts the extraction children there are at that moment: "
    "they come and go with the jobs (one per job in hand, the worker takes 2 at once), and the "
    "runs at 17:48 and 18:00 UTC read one after the warm-up and two at the end (+56 MiB, 6 "
    "points of the +9.3%); serve itself grew 1.7-2.9% and the worker 3.2-3.5%.",
]
TERMINAL = {"completed", "parse_failed", "chunk_failed", "extract_failed"}

# Operation -> weight (the chance of being drawn next).
MIX: dict[str, int] = {
    "list_kbs": 10,
    "list_files": 10,
    "list_agents": 10,
    "list_conversations": 10,
    "get_conversation": 6,
    "chat": 18,
    "upload": 8,
    "members": 4,
    "settings_get": 4,
    "settings_put": 2,
}


# The operations that are one GET: their endpoint, and whether as the admin (else a member).
READS = {
    "list_kbs": ("GET /kb/manage", False),
    "list_agents": ("GET /agents", False),
    "list_conversations": ("GET /conversations", False),
    "members": ("GET /admin/getUsersInOrg", True),
    "settings_get": ("GET /orgSettings", True),
}


def now() -> float:
    return time.monotonic()


@dataclass
class Sample:
    endpoint: str
    at: float  # monotonic start
    ms: float
    ok: bool


@dataclass
class Checkpoint:
    label: str
    at: float  # seconds since the load began
    rss: dict[str, int]  # "serve", "worker ...", "total"
    pss_total: int
    pg_pss: int
    serve_fds: int
    worker_fds: int
    fd_kinds: dict[str, int]
    db_connections: int
    db_breakdown: dict[str, int]
    children: list[str]
    db_opened_since_start: int = 0  # backends started after the warm-up checkpoint
    db_opened: list[str] = field(default_factory=list)  # "pid state: last statement"
    requests: int = 0
    waited: float = 0.0


@dataclass
class Recorder:
    samples: list[Sample] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    error_examples: dict[str, str] = field(default_factory=dict)
    chat_first_ms: list[tuple[float, float]] = field(default_factory=list)
    processing_ms: list[tuple[float, float]] = field(default_factory=list)
    file_statuses: Counter[str] = field(default_factory=Counter)

    def add(self, endpoint: str, started: float, ok: bool, detail: str = "") -> None:
        self.samples.append(Sample(endpoint, started, (now() - started) * 1000, ok))
        if not ok:
            self.error(endpoint, detail)

    def error(self, endpoint: str, detail: str) -> None:
        self.errors[endpoint] += 1
        self.error_examples.setdefault(endpoint, detail[:300])
        print(f"ERROR {endpoint}: {detail[:300]}", flush=True)


@dataclass
class PendingFile:
    kb_id: int
    file_id: str
    associated: float


class Soak:
    def __init__(self, args: argparse.Namespace, platform: Platform, provider_port: int) -> None:
        self.args = args
        self.platform = platform
        self.provider_port = provider_port
        self.admin_headers = harness.bearer(platform.token(ADMIN, "admin", ORG_ID))
        self.member_headers = [
            harness.bearer(platform.token(f"user_soak_{i}", "member", ORG_ID))
            for i in range(args.clients)
        ]
        self.agent_id = 0
        self.kb_ids: list[int] = []
        self.rec = Recorder()
        self.expected = content_text(args.tokens)
        self.pending: dict[str, PendingFile] = {}
        # Per knowledge base, its finished files' ids, oldest first.
        self.finished: dict[int, list[str]] = defaultdict(list)
        self.uploads = 0
        self.chats = 0
        self.settings_puts = 0
        self.paused = asyncio.Event()
        self.running = asyncio.Event()  # set while not paused (and at the end)
        self.measuring = asyncio.Lock()  # the watcher's polls wait while resources are read
        self.start_wall = 0.0  # when the warm-up checkpoint was read (epoch seconds)
        self.idle: set[int] = set()
        self.stop_load = False
        self.clients: list[httpx.AsyncClient] = []
        self.pg: asyncpg.Connection | None = None
        self.load_started = 0.0
        self.paused_seconds = 0.0
        self.timeline: list[Checkpoint] = []
        self.checkpoints: dict[str, Checkpoint] = {}
        self.window: tuple[float, float] = (0.0, 0.0)
        self.stopped_at = float("inf")

    @property
    def url(self) -> str:
        return self.platform.url

    def new_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=httpx.Timeout(self.args.timeout))

    # seeding ------------------------------------------------------------------------------
    async def seed(self) -> None:
        async with self.new_client() as client:
            body = {"name": "Soak agent", "model": f"openai:{MODEL}"}
            response = await client.post("/agents", json=body, headers=self.admin_headers)
            self.agent_id = int(expect(response, 201)["agent"]["id"])
            for i in range(KB_COUNT):
                response = await client.post(
                    "/kb/manage", json={"name": f"Soak KB {i}"}, headers=self.admin_headers
                )
                self.kb_ids.append(int(expect(response, 201)["knowledgeBase"]["id"]))
            # Each member's first call records the member (just-in-time).
            for headers in self.member_headers:
                expect(await client.get("/kb/manage", headers=headers), 200)
            # Prime: one file processed (the worker loads its embedding model), one chat.
            rng = random.Random(self.args.seed - 1)
            started = now()
            if not await self.upload(client, rng, self.kb_ids[0]):
                raise BenchError(f"priming upload failed: {dict(self.rec.error_examples)}")
            await self.processed(client, "the priming file was")
            if self.rec.errors:
                raise BenchError(f"priming failed: {dict(self.rec.error_examples)}")
            print(f"primed: a file processed in {now() - started:.1f} s", flush=True)
            threads: list[str] = []
            await self.chat(client, rng, 0, threads)
            if self.rec.errors:
                raise BenchError(f"priming chat failed: {dict(self.rec.error_examples)}")
        await self.saturate()
        self.rec = Recorder()
        self.finished.clear()

    async def saturate(self) -> None:
        """Bring serve's connection pools to their high-water mark before the load: bursts of
        more concurrent listings and chats than the pools hold. A pool keeps what it opened
        (asyncpg closes a connection only after 300 s unused), so without this a new peak of
        concurrent use during the load shows as connections (and fds) more at the end than
        after the warm-up, which is no leak; a leak still shows, as growth past the peak."""
        limits = httpx.Limits(max_connections=SATURATION_REQUESTS + SATURATION_CHATS)
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:
            for burst in range(SATURATION_BURSTS):
                members = self.member_headers
                listings = [
                    client.get(f"{self.url}/kb/manage", headers=members[n % len(members)])
                    for n in range(SATURATION_REQUESTS)
                ]
                chats = [
                    read_stream(
                        client,
                        f"{self.url}/chat",
                        chat_body(self.agent_id, f"Saturation {burst}.{n}", f"Burst {n}"),
                        members[n % len(members)],
                        ui_delta,
                    )
                    for n in range(SATURATION_CHATS)
                ]
                answers = await asyncio.gather(*listings, *chats)
                listed = answers[:SATURATION_REQUESTS]
                if any(a.status_code != 200 for a in listed if isinstance(a, httpx.Response)):
                    raise BenchError("a saturation listing failed")
        # As many files at once as the worker takes jobs (and more): each job in hand keeps
        # an extraction child of its own, so the warm-up's figures count all of them.
        rng = random.Random(self.args.seed - 2)
        async with self.new_client() as files:
            kbs = self.kb_ids
            await asyncio.gather(
                *(self.upload(files, rng, kbs[n % len(kbs)]) for n in range(SATURATION_FILES))
            )
            await self.processed(files, "the saturation files were")
        print(f"saturated: {SATURATION_BURSTS} bursts, {SATURATION_FILES} files", flush=True)

    async def processed(self, client: httpx.AsyncClient, what: str) -> None:
        """Until the files in progress are processed (`what` not processed: 300 s at most)."""
        started = now()
        while self.pending:
            await self.poll_files(client)
            if now() - started > 300:
                raise BenchError(f"{what} not processed within 300 s")
            await asyncio.sleep(0.5)

    # operations ---------------------------------------------------------------------------
    async def call(
        self,
        client: httpx.AsyncClient,
        endpoint: str,
        expected: int = 200,
        url: str = "",
        **kw: Any,
    ) -> httpx.Response | None:
        """One request, recorded under `endpoint` ("METHOD /path", the URL unless `url`)."""
        started = now()
        method, path = endpoint.split()[:2]
        try:
            response = await client.request(method, url or path, **kw)
        except httpx.HTTPError as error:
            self.rec.add(endpoint, started, False, f"{type(error).__name__}: {error}")
            return None
        ok = response.status_code == expected
        detail = "" if ok else f"HTTP {response.status_code}: {response.text[:200]}"
        self.rec.add(endpoint, started, ok, detail)
        return response if ok else None

    async def upload(self, client: httpx.AsyncClient, rng: random.Random, kb_id: int) -> bool:
        self.uploads += 1
        n = self.uploads
        data = markdown_note(rng, f" ({n})", sections=3).encode()
        name = f"soak-{n:05d}.md"
        presign = {"fileName": name, "contentType": "text/markdown", "fileSize": len(data)}
        response = await self.call(
            client, "POST /upload/presigned", json=presign, headers=self.admin_headers
        )
        if response is None:
            return False
        upload = response.json()
        signed = {"url": upload["uploadUrl"], "headers": upload.get("headers") or {}}
        if (
            await self.call(client, "PUT /storage/… (signed upload)", content=data, **signed)
            is None
        ):
            return False
        keys = {k: upload[k] for k in ("fileId", "fileKey", "contentKey")}
        body = {"kbId": kb_id, "fileName": name, "contentType": "text/markdown", **keys}
        body["fileSize"] = len(data)
        self.pending[upload["fileId"]] = PendingFile(kb_id, upload["fileId"], now())
        associated = await self.call(
            client, "POST /kb/files", 201, json=body, headers=self.admin_headers
        )
        if associated is None:
            self.pending.pop(upload["fileId"], None)
            return False
        return True

    async def remove_oldest_file(self, client: httpx.AsyncClient, kb_id: int) -> None:
        finished = self.finished[kb_id]
        if len(finished) <= self.args.kb_files:
            return
        file_id = finished.pop(0)
        params = {"kbId": kb_id, "fileId": file_id}
        await self.call(client, "DELETE /kb/files", params=params, headers=self.admin_headers)

    async def poll_files(self, client: httpx.AsyncClient) -> None:
        for kb_id in {p.kb_id for p in self.pending.values()}:
            params, headers = {"kbId": kb_id}, self.admin_headers
            response = await self.call(
                client, "GET /kb/files (status watcher)", params=params, headers=headers
            )
            if response is None:
                continue
            for item in response.json()["files"]:
                file_id = item["fileId"]
                pending = self.pending.get(file_id)
                status = item.get("processingStatus")
                if pending is None or status not in TERMINAL:
                    continue
                del self.pending[file_id]
                self.rec.file_statuses[status] += 1
                self.finished[kb_id].append(file_id)
                if status == "completed":
                    took = (now() - pending.associated) * 1000
                    self.rec.processing_ms.append((pending.associated, took))
                else:
                    self.rec.error(
                        "file processing",
                        f"{item.get('fileName')}: {status}: {item.get('processingError')}",
                    )

    async def chat(
        self, client: httpx.AsyncClient, rng: random.Random, index: int, threads: list[str]
    ) -> None:
        headers = self.member_headers[index]
        self.chats += 1
        text = f"Soak question {self.chats}: {sentence(rng, rng.choice(list(TOPICS)))}"
        follow = threads and rng.random() < self.args.follow_up
        if follow:
            thread = rng.choice(threads[-3:])
            body: dict[str, Any] = {
                "agentId": self.agent_id,
                "threadId": thread,
                "messages": [{"role": "user", "parts": [{"type": "text", "text": text}]}],
            }
            endpoint = "POST /chat (follow-up, streamed)"
        else:
            body = chat_body(self.agent_id, text, f"Soak chat {self.chats}")
            endpoint = "POST /chat (new, streamed)"
        started = now()
        result = await read_stream(client, f"{self.url}/chat", body, headers, ui_delta)
        problem = None
        if not result.ok:
            problem = "; ".join(result.errors) or f"status {result.status}"
        elif "".join(result.text) != self.expected:
            problem = "the streamed text differs from the scripted answer"
        self.rec.add(endpoint, started, problem is None, problem or "")
        if problem is None:
            self.rec.chat_first_ms.append((started, result.first_ms))
            if not follow and result.thread_id:
                threads.append(result.thread_id)
        while len(threads) > self.args.conversations:
            old = threads.pop(0)
            params = {"threadId": old}
            await self.call(client, "DELETE /conversations", params=params, headers=headers)

    async def operation(
        self, op: str, client: httpx.AsyncClient, rng: random.Random, index: int, threads: list[str]
    ) -> None:
        member = self.member_headers[index]
        admin = self.admin_headers
        if op in READS:
            endpoint, as_admin = READS[op]
            await self.call(client, endpoint, headers=admin if as_admin else member)
        elif op == "list_files":
            params = {"kbId": rng.choice(self.kb_ids)}
            await self.call(client, "GET /kb/files", params=params, headers=admin)
        elif op == "get_conversation":
            if not threads:
                await self.chat(client, rng, index, threads)
                return
            params = {"threadId": rng.choice(threads)}
            await self.call(client, "GET /getConversation", params=params, headers=member)
        elif op == "chat":
            await self.chat(client, rng, index, threads)
        elif op == "upload":
            kb_id = rng.choice(self.kb_ids)
            await self.upload(client, rng, kb_id)
            await self.remove_oldest_file(client, kb_id)
        elif op == "settings_put":
            self.settings_puts += 1
            n = self.settings_puts
            settings = {
                "sidebarLinks": [
                    {"label": f"Soak link {n}", "url": f"https://example.com/soak/{n}"}
                ],
                "feedbackModal": {"customHtml": f"<p>Soak feedback <b>{n}</b></p>"},
            }
            await self.call(client, "PUT /orgSettings", json={"settings": settings}, headers=admin)
        else:  # pragma: no cover
            raise BenchError(f"unknown operation {op}")

    def draw(self, rng: random.Random) -> str:
        ops = [op for op in MIX if op != "upload" or len(self.pending) < self.args.max_pending]
        return rng.choices(ops, weights=[MIX[op] for op in ops])[0]

    async def client_loop(self, index: int) -> None:
        rng = random.Random(self.args.seed * 1000 + index)
        threads: list[str] = []
        while not self.stop_load:
            if self.paused.is_set():
                self.idle.add(index)
                await self.running.wait()
                self.idle.discard(index)
                continue
            op = self.draw(rng)
            try:
                await self.operation(op, self.clients[index], rng, index, threads)
            except Exception as error:  # counted; the load goes on
                self.rec.error(f"client ({op})", f"{type(error).__name__}: {error}")
            if self.args.think:
                await asyncio.sleep(self.args.think)
        self.idle.add(index)

    async def watcher(self) -> None:
        """Polls the files in progress every second, on a connection of its own per round
        (closed before the next), never while the resources are being read."""
        while not self.stop_load or self.pending:
            if self.pending:
                async with self.measuring, self.new_client() as client:
                    try:
                        await self.poll_files(client)
                    except Exception as error:
                        self.rec.error("watcher", f"{type(error).__name__}: {error}")
            await asyncio.sleep(1.0)
            if self.stop_load and now() - self.stopped_at > self.args.end_wait + 120:
                for pending in self.pending.values():
                    self.rec.error("file processing", f"{pending.file_id} never finished")
                self.pending.clear()

    # measuring ----------------------------------------------------------------------------
    async def measure(self, label: str) -> Checkpoint:
        async with self.measuring:
            return await self._measure(label)

    async def _measure(self, label: str) -> Checkpoint:
        assert self.pg is not None
        serve = psutil.Process(self.platform.process.popen.pid)
        samples: dict[str, list[int]] = defaultdict(list)
        for _ in range(5):
            by_name: Counter[str] = Counter()
            for proc in [serve, *serve.children(recursive=True)]:
                try:
                    rss = proc.memory_info().rss
                except psutil.Error:
                    continue
                by_name["serve" if proc.pid == serve.pid else describe(proc)] += rss
            for name, value in by_name.items():
                samples[name].append(value)
            samples["total"].append(sum(by_name.values()))
            await asyncio.sleep(0.2)
        pss_total = 0
        worker_fds = 0
        children: list[str] = []
        for proc in [serve, *serve.children(recursive=True)]:
            try:
                pss_total += proc.memory_full_info().pss
                if proc.pid != serve.pid:
                    name = describe(proc)
                    children.append(f"{name} (pid {proc.pid})")
                    if name == "worker":
                        worker_fds += proc.num_fds()
            except psutil.Error:
                continue
        rss = {name: int(statistics.median(values)) for name, values in samples.items()}
        pg_pid, _ = harness.postmaster(self.platform.pgdata)
        rows = await self.pg.fetch(
            "SELECT usename, coalesce(application_name, '') AS app, state, count(*) AS n FROM "
            "pg_stat_activity WHERE datname = current_database() AND backend_type = 'client "
            "backend' AND pid <> pg_backend_pid() GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
        )
        breakdown = {f"{r['usename']}/{r['app'] or '-'}/{r['state']}": r["n"] for r in rows}
        opened: list[str] = []
        if self.start_wall:
            # The backends started since the warm-up checkpoint, with their last statement:
            # which pool (the ledger's statements are its own) or process opened them.
            new_rows = await self.pg.fetch(
                "SELECT pid, state, left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS q "
                "FROM pg_stat_activity WHERE datname = current_database() "
                "AND backend_type = 'client backend' AND pid <> pg_backend_pid() "
                "AND backend_start > to_timestamp($1) ORDER BY backend_start",
                self.start_wall,
            )
            opened = [f"{r['pid']} {r['state']}: {r['q']}" for r in new_rows]
        return Checkpoint(
            label=label,
            at=self.elapsed(),
            rss=rss,
            pss_total=pss_total,
            pg_pss=harness.tree_pss(pg_pid),
            serve_fds=serve.num_fds(),
            worker_fds=worker_fds,
            fd_kinds=fd_kinds(serve, self.provider_port, self.platform.port),
            db_connections=sum(breakdown.values()),
            db_breakdown=breakdown,
            children=children,
            db_opened_since_start=len(opened),
            db_opened=opened,
        )

    def elapsed(self) -> float:
        return now() - self.load_started if self.load_started else 0.0

    async def quiesce(self) -> float:
        """Pause the clients, wait for them to finish what they are doing, close their
        connections; returns when that began (monotonic)."""
        began = now()
        self.running.clear()
        self.paused.set()
        for _ in range(int(self.args.timeout * 20) + 100):
            if len(self.idle) >= self.args.clients:
                break
            await asyncio.sleep(0.05)
        for client in self.clients:
            await client.aclose()
        return began

    async def resume(self, began: float) -> None:
        self.clients = [self.new_client() for _ in range(self.args.clients)]
        self.paused_seconds += now() - began
        self.paused.clear()
        self.running.set()

    async def sampler(self) -> None:
        interval = self.args.seconds / 20
        while not self.stop_load:
            await asyncio.sleep(interval)
            if self.stop_load or self.paused.is_set():
                continue
            point = await self.measure("under load")
            point.requests = len(self.rec.samples)
            self.timeline.append(point)
            print(
                f"t={point.at:6.0f}s  RSS serve+children {point.rss['total'] / 2**20:7.1f} MiB  "
                f"fds {point.serve_fds}  db connections {point.db_connections}  "
                f"requests {len(self.rec.samples)}  errors {sum(self.rec.errors.values())}",
                flush=True,
            )

    async def run(self) -> None:
        args = self.args
        await self.seed()
        self.pg = await harness.owner_connection(self.platform.pgdata)
        try:
            self.clients = [self.new_client() for _ in range(args.clients)]
            self.running.set()
            self.load_started = now()
            tasks = [asyncio.ensure_future(self.client_loop(i)) for i in range(args.clients)]
            watcher = asyncio.ensure_future(self.watcher())
            sampler = asyncio.ensure_future(self.sampler())
            print(f"load: {args.clients} clients for {args.seconds:g} s", flush=True)
            await asyncio.sleep(args.warmup)
            began = await self.quiesce()
            await asyncio.sleep(args.settle)
            start_point = await self.measure("after warm-up")
            self.checkpoints["start"] = start_point
            self.start_wall = time.time()
            self.print_point(start_point)
            await self.resume(began)
            window_start = now()
            remaining = args.seconds - (now() - self.load_started - self.paused_seconds)
            await asyncio.sleep(max(0.0, remaining))
            window_end = now()
            began = await self.quiesce()
            self.stop_load = True
            self.stopped_at = now()
            self.running.set()
            await asyncio.gather(*tasks)
            sampler.cancel()
            # Files still processing: let them finish (the watcher records them).
            for _ in range(240):
                if not self.pending:
                    break
                await asyncio.sleep(0.5)
            await asyncio.sleep(args.settle)
            end_point = await self.measure("end")
            while (
                not settled_back(start_point, end_point) and now() - self.stopped_at < args.end_wait
            ):
                await asyncio.sleep(1.0)
                end_point = await self.measure("end")
            end_point.waited = now() - self.stopped_at
            self.checkpoints["end"] = end_point
            self.print_point(end_point)
            await watcher
            self.window = (window_start, window_end)
        finally:
            await self.pg.close()

    @staticmethod
    def print_point(point: Checkpoint) -> None:
        print(
            f"{point.label} (t={point.at:.0f}s): RSS {mib(point.rss)}; fds {point.serve_fds} "
            f"{point.fd_kinds}; worker fds {point.worker_fds}; db connections "
            f"{point.db_connections} {point.db_breakdown}; PostgreSQL PSS "
            f"{point.pg_pss / 2**20:.0f} MiB",
            flush=True,
        )


def describe(proc: psutil.Process) -> str:
    try:
        cmd = proc.cmdline()
    except psutil.Error:
        return "child"
    if "worker" in cmd and "entrypoints.cli" in cmd:
        return "worker"
    if "-m" in cmd and cmd.index("-m") + 1 < len(cmd):
        return f"python -m {cmd[cmd.index('-m') + 1]}"
    if len(cmd) > 1 and not cmd[1].startswith("-"):
        return f"{Path(cmd[0]).name} {Path(cmd[1]).name}"
    return Path(cmd[0]).name if cmd else "child"


def fd_kinds(serve: psutil.Process, provider_port: int, port: int) -> dict[str, int]:
    """serve's descriptors by kind: its listening socket, connections from clients, to the
    provider, to PostgreSQL (Unix sockets), other sockets, pipes, files, others."""
    kinds: Counter[str] = Counter()
    try:
        inet = serve.net_connections(kind="inet")
        unix = serve.net_connections(kind="unix")
        fds = os.listdir(f"/proc/{serve.pid}/fd")
    except (psutil.Error, OSError):
        return {}
    for c in inet:
        if c.status == psutil.CONN_LISTEN:
            kinds["listen"] += 1
        elif c.raddr and c.raddr.port == provider_port:
            kinds[f"provider {c.status}"] += 1
        elif c.laddr and c.laddr.port == port:
            kinds[f"http clients {c.status}"] += 1
        else:
            kinds["other tcp"] += 1
    kinds["unix sockets"] = len(unix)
    other, all_sockets = Counter[str](), 0
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{serve.pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            all_sockets += 1
        elif target.startswith("pipe:"):
            other["pipes"] += 1
        elif target.startswith("anon_inode:"):
            other[target.split(":", 1)[1].strip("[]")] += 1
        elif target.startswith("/"):
            other["files"] += 1
        else:
            other["other"] += 1
    if all_sockets > len(inet) + len(unix):
        kinds["other sockets"] = all_sockets - len(inet) - len(unix)
    kinds.update(other)
    return dict(sorted(kinds.items()))


def settled_back(start: Checkpoint, end: Checkpoint) -> bool:
    """No more fds or database connections than after the warm-up. The pools start the load
    at their high-water mark (`Soak.saturate`) and close a connection unused for 300 s, so
    fewer is the pools giving back; a leak shows as more."""
    return end.serve_fds <= start.serve_fds and end.db_connections <= start.db_connections


def mib(rss: dict[str, int]) -> str:
    return ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in rss.items())


# report -------------------------------------------------------------------------------------
def section(soak: Soak, args: argparse.Namespace, info: dict[str, Any]) -> tuple[str, bool]:
    rec = soak.rec
    w0, w1 = soak.window
    window = w1 - w0
    in_window = [s for s in rec.samples if w0 <= s.at < w1]
    by_endpoint: dict[str, list[Sample]] = defaultdict(list)
    for s in in_window:
        by_endpoint[s.endpoint].append(s)
    all_by_endpoint: Counter[str] = Counter(s.endpoint for s in rec.samples)
    start, end = soak.checkpoints["start"], soak.checkpoints["end"]
    errors = sum(rec.errors.values())
    growth = (end.rss["total"] - start.rss["total"]) / start.rss["total"]
    mix = ", ".join(f"{op} {w}" for op, w in MIX.items())
    lines = [
        *harness.heading(SECTION_TITLE, "soak.py"),
        f"- Machine: {harness.machine_line(info['machine'])}; at the end {info['load_end']}. "
        f"`uptime` at start: `{info['uptime_start']}`; at the end: `{info['uptime_end']}`. "
        "serve, its worker, PostgreSQL, the scripted provider and the clients share these CPUs, "
        "and other sessions' jobs on the machine were not stopped.",
        f"- Code measured: {info['code']}.",
        f"- Platform: `agent-platform serve` on the embedded defaults (temporary data dir, "
        f"embedded PostgreSQL, the job worker as serve's child: `AP_WORKER_IN_PROCESS` unset; "
        f"one uvicorn worker; litestar {version('litestar')}, dishka {version('dishka')}, "
        f"asyncpg {version('asyncpg')}, httpx {version('httpx')}), `AP_LOG_LEVEL="
        f"{args.log_level}`, `AP_OPENAI_BASE_URL` at `bench/scripted_provider.py` "
        f"(`openai:{MODEL}`: {args.tokens} content deltas 1 ms apart, usage, `[DONE]`).",
        f"- Load: {args.clients} asyncio clients (httpx, one connection pool each), closed "
        f"loop{f' with {args.think:g} s between operations' if args.think else ''}, each drawing "
        f"its next operation at random (seed {args.seed}) with weights: {mix}. Listings and chats "
        "as a member (one user per client), uploads, file removals and admin calls as an "
        "`org:admin`. Uploads: presign, signed PUT, associate a generated Markdown file (~1-2 KB) "
        f"to one of {KB_COUNT} knowledge bases, at most {args.max_pending} processing at once "
        "(upload drawn otherwise skipped); a watcher polls `GET /kb/files` every second for their "
        f"status (its own row); past {args.kb_files} finished files a knowledge base's oldest is "
        f"removed. Chats: a new conversation, or ({args.follow_up:.0%}) a follow-up turn in one of "
        f"the client's 3 newest; past {args.conversations} per client the oldest is deleted. "
        "Primed before the load (one file processed: the worker's embedding model loaded; one "
        f"chat), then {SATURATION_BURSTS} bursts of {SATURATION_REQUESTS} listings and "
        f"{SATURATION_CHATS} chats at once, and {SATURATION_FILES} files at once, so serve's "
        "connection pools and the worker's extraction children start at their high-water mark (a "
        "pool keeps what it opened for 300 s unused).",
        f"- Duration: {args.seconds:g} s of load: a {args.warmup:g} s warm-up, then the "
        f"measured window ({window:.0f} s). At the end of the warm-up and at the end the "
        "clients pause, finish what they are doing and close their connections; after "
        f"{args.settle:g} s (at the end: once the files in progress are done, retried each "
        f"second until fds and connections match, at most {args.end_wait:g} s) the figures "
        "are read: RSS of serve and its children summed (psutil, median of 5 samples 0.2 s "
        "apart), serve's open fds, database connections (`pg_stat_activity`, client backends "
        "on the platform's database, the benchmark's own left out). PostgreSQL's memory "
        "(postmaster and backends, PSS) is reported apart: it is not serve's child.",
        *HISTORY,
        "",
        f"Throughput and latency in the measured window ({window:.0f} s); errors over the "
        "whole run, warm-up included. Chats: the time to `data: [DONE]`.",
        "",
        "| Endpoint | requests (window) | req/s | p50 (ms) | p99 (ms) | errors (whole run) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for endpoint in sorted(all_by_endpoint, key=lambda e: -len(by_endpoint.get(e, []))):
        samples = by_endpoint.get(endpoint, [])
        ms = [s.ms for s in samples]
        p50 = f"{percentile(ms, 50):.1f}" if ms else "-"
        p99 = f"{percentile(ms, 99):.1f}" if ms else "-"
        lines.append(
            f"| `{endpoint}` | {len(samples)} | {len(samples) / window:.2f} | {p50} | {p99} | "
            f"{rec.errors.get(endpoint, 0)} |"
        )
    total_ms = [s.ms for s in in_window]
    lines.append(
        f"| **all** | {len(in_window)} | {len(in_window) / window:.1f} | "
        f"{percentile(total_ms, 50):.1f} | {percentile(total_ms, 99):.1f} | {errors} |"
    )
    first = [ms for at, ms in rec.chat_first_ms if w0 <= at < w1]
    processing = [ms for at, ms in rec.processing_ms if w0 <= at < w1]
    other_errors = {k: n for k, n in rec.errors.items() if k not in all_by_endpoint}
    lines += [
        "",
        f"- Chats: time to the first text delta p50 {percentile(first, 50):.1f} ms, p99 "
        f"{percentile(first, 99):.1f} ms ({len(first)} chats in the window)."
        if first
        else "- Chats: none in the window.",
        f"- Files: {sum(rec.file_statuses.values())} finished over the run "
        f"({', '.join(f'{k} {n}' for k, n in rec.file_statuses.items()) or 'none'}); "
        + (
            f"associated -> `completed` seen by the watcher (1 s polls) p50 "
            f"{percentile(processing, 50) / 1000:.1f} s, p99 "
            f"{percentile(processing, 99) / 1000:.1f} s ({len(processing)} in the window)."
            if processing
            else "none associated in the window."
        ),
    ]
    if other_errors:
        lines.append(f"- Other errors: {other_errors}.")
    if rec.errors:
        lines.append(
            "- First error of each kind: "
            + "; ".join(f"`{k}`: {d}" for k, d in rec.error_examples.items())
            + "."
        )
    opened_note = (
        ": " + "; ".join(f"`{x}`" for x in end.db_opened) + " (pid, state: last statement)."
        if end.db_opened
        else "."
    )
    lines += [
        "",
        f"| Resource | after warm-up (t = {start.at:.0f} s) | end (t = {end.at:.0f} s) | change |",
        "|---|---:|---:|---:|",
    ]
    names = sorted({*start.rss, *end.rss} - {"total"}, key=lambda n: (n != "serve", n))
    for name in [*names, "total"]:
        a, b = start.rss.get(name), end.rss.get(name)
        label = "RSS, serve + children" if name == "total" else f"RSS, {name}"
        if a is None or b is None:
            lines.append(f"| {label} | {fmt_mib(a)} | {fmt_mib(b)} | - |")
            continue
        lines.append(f"| {label} | {fmt_mib(a)} | {fmt_mib(b)} | {(b - a) / a:+.1%} |")
    lines += [
        f"| PSS, serve + children | {fmt_mib(start.pss_total)} | {fmt_mib(end.pss_total)} | "
        f"{pct(start.pss_total, end.pss_total)} |",
        f"| PostgreSQL (PSS, postmaster + backends) | {fmt_mib(start.pg_pss)} | "
        f"{fmt_mib(end.pg_pss)} | {pct(start.pg_pss, end.pg_pss)} |",
        f"| serve open fds | {start.serve_fds} | {end.serve_fds} | "
        f"{end.serve_fds - start.serve_fds:+d} |",
        f"| worker open fds | {start.worker_fds} | {end.worker_fds} | "
        f"{end.worker_fds - start.worker_fds:+d} |",
        f"| database connections | {start.db_connections} | {end.db_connections} | "
        f"{end.db_connections - start.db_connections:+d} |",
        "",
        f"- serve's fds by kind: after warm-up {start.fd_kinds}; end {end.fd_kinds}.",
        f"- Database connections (user/application/state): after warm-up "
        f"{start.db_breakdown}; end {end.db_breakdown}.",
        f"- serve's children: after warm-up {', '.join(start.children) or 'none'}; end "
        f"{', '.join(end.children) or 'none'}.",
        f"- Database connections opened after the warm-up checkpoint and still open at the "
        f"end: {end.db_opened_since_start} (the pools keep idle connections: asyncpg's for "
        "up to 300 s idle, min 1; so a new high-water mark of concurrent use shows here too, "
        "once, where a leak would keep adding)" + opened_note,
        f"- The end figures were read {end.waited:.1f} s after the load stopped.",
    ]
    if soak.timeline:
        peak = max(soak.timeline, key=lambda p: p.db_connections)
        peak_fds = max(soak.timeline, key=lambda p: p.serve_fds)
        lines.append(
            f"- Under load: at most {peak.db_connections} database connections (t = "
            f"{peak.at:.0f} s) and {peak_fds.serve_fds} serve fds (t = {peak_fds.at:.0f} s)."
        )
    if soak.timeline:
        lines += [
            "",
            "Under load (sampled without pausing, client connections and streams open; t: seconds "
            "since the load began, the pauses included):",
            "",
            "| t (s) | RSS serve + children (MiB) | RSS serve (MiB) | RSS worker (MiB) | "
            "serve fds | db connections | requests so far |",
            "|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for p in soak.timeline:
            lines.append(
                f"| {p.at:.0f} | {p.rss['total'] / 2**20:.1f} | {p.rss['serve'] / 2**20:.1f} | "
                f"{p.rss.get('worker', 0) / 2**20:.1f} | {p.serve_fds} | {p.db_connections} | "
                f"{p.requests} |"
            )
    fds_ok, db_ok = end.serve_fds <= start.serve_fds, end.db_connections <= start.db_connections
    lines += [
        "",
        "| Target | Measured | Result |",
        "|---|---:|---|",
        f"| errors (any unexpected status, transport error, bad stream, failed file) = 0 | "
        f"{errors} | {verdict(errors == 0)} |",
        f"| RSS of serve + children, end vs after warm-up: growth < {RSS_TARGET:.0%} | "
        f"{growth:+.1%} | {verdict(growth < RSS_TARGET)} |",
        f"| serve open fds, end <= after warm-up (pools saturated first) | "
        f"{start.serve_fds} -> {end.serve_fds} | {verdict(fds_ok)} |",
        f"| database connections, end <= after warm-up (pools saturated first) | "
        f"{start.db_connections} -> {end.db_connections} | {verdict(db_ok)} |",
        "",
    ]
    return "\n".join(lines), errors == 0 and growth < RSS_TARGET and fds_ok and db_ok


def fmt_mib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:.1f} MiB"


def pct(a: int, b: int) -> str:
    return f"{(b - a) / a:+.1%}" if a else "-"


# run ----------------------------------------------------------------------------------------
def run(args: argparse.Namespace, machine: dict[str, str]) -> tuple[str, bool]:
    info: dict[str, Any] = {"machine": machine, "uptime_start": harness.uptime()}
    info["code"] = harness.code_state()
    with harness.Rig("ap-bench-soak-") as rig:
        port = harness.free_port()
        platform, _ = rig.scripted(args, MODEL, port=port)
        soak = Soak(args, platform, port)
        try:
            asyncio.run(soak.run())
        except BaseException:
            kept = Path(tempfile.gettempdir()) / "soak-serve-failed.log"
            kept.write_bytes(platform.process.log.read_bytes())
            print(f"serve's log kept in {kept}", file=sys.stderr)
            raise
    info["uptime_end"] = harness.uptime()
    info["load_end"] = f"load average {harness.load_average()}"
    return section(soak, args, info)


def main() -> int:
    parser = harness.parser(__doc__, provider=True, seed=17)
    parser.add_argument("--seconds", type=float, default=600.0, help="load duration")
    parser.add_argument("--warmup", type=float, help="seconds (default: 10%% of --seconds)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--think", type=float, default=0.0, help="seconds between operations")
    parser.add_argument("--max-pending", type=int, default=4, help="files processing at once")
    parser.add_argument("--kb-files", type=int, default=30, help="finished files kept per KB")
    parser.add_argument("--conversations", type=int, default=10, help="kept per client")
    parser.add_argument("--follow-up", type=float, default=0.3, help="share of follow-up chats")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before measuring")
    parser.add_argument("--end-wait", type=float, default=30.0, help="at most, at the end")
    parser.add_argument("--timeout", type=float, default=60.0, help="per request, seconds")
    args = parser.parse_args()
    if args.warmup is None:
        args.warmup = args.seconds / 10
    if args.seconds <= args.warmup or args.clients < 1:
        parser.error("--seconds must exceed --warmup, and --clients be at least 1")
    return harness.run(SECTION_TITLE, args, run)


if __name__ == "__main__":
    sys.exit(main())
