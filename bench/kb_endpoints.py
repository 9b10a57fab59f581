"""The knowledge-base list endpoints at size, in the real service side by side with a bare
Litestar + asyncpg + msgspec app (`bench/bare_app.py`) running the same SQL on the same embedded
PostgreSQL: `GET /kb/files?kbId=` (a knowledge base of 500 files, whole; one of 10,000 files, a
page of 100 at the start and deep in it) and `GET /kb/manage` (1,000 knowledge bases, and 50).

    .venv/bin/python bench/kb_endpoints.py [--rounds 3] [--duration 10] [--connections 32]

Starts `agent-platform serve` on a temporary data dir (JSON logs, as deployed), seeds it (the
knowledge bases and the 500 files over HTTP, the 10,000 files with one INSERT as the owner,
through the same trigger that keeps the totals), starts the bare app, checks that both return
the same bodies, then loads one server at a time with wrk (warm-up, then interleaved rounds)
and reports medians. Targets: every endpoint reaches at least 85% of the bare endpoint's
throughput at 32 connections; with one client, a page of 100 of 10,000 files answers in under
10 ms p50 and the listing of 1,000 knowledge bases in under 20 ms p50. The result goes to
stdout and to this benchmark's section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import psutil

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
LUA_SCRIPT = BENCH_DIR / "wrk_report.lua"
REPORT = ROOT / "BENCHMARKS.md"
REPORT_TITLE = "# Benchmarks"
SECTION_TITLE = "KB list endpoints: full service vs bare Litestar + asyncpg"
ORG_ID = "org_bench"
SMALL_ORG_ID = "org_small"
KB_COUNT = 1_000
SMALL_KB_COUNT = 50
FILE_COUNT = 500
BIG_FILE_COUNT = 10_000
PAGE = 100
DEEP_PAGE_AFTER = 5_000
TARGET = 0.85
LATENCY_TARGETS_MS = {"page": 10.0, "page_deep": 10.0, "manage": 20.0}
ENDPOINTS = {
    "files": f"GET /kb/files?kbId=… ({FILE_COUNT} files, whole)",
    "page": f"GET /kb/files?kbId=…&limit={PAGE} (first page of {BIG_FILE_COUNT:,})",
    "page_deep": (
        f"GET /kb/files?kbId=…&limit={PAGE}&cursor=… (after {DEEP_PAGE_AFTER:,} of "
        f"{BIG_FILE_COUNT:,})"
    ),
    "manage": f"GET /kb/manage ({KB_COUNT:,} knowledge bases)",
    "manage_small": f"GET /kb/manage ({SMALL_KB_COUNT} knowledge bases)",
}
SERVERS = ("full", "bare")


class BenchError(Exception):
    pass


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path


@dataclass
class Measurement:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: dict[str, int]

    @property
    def rps(self) -> float:
        return self.requests / self.seconds


@dataclass
class Results:
    rounds: dict[tuple[str, str], list[Measurement]] = field(default_factory=dict)

    def add(self, endpoint: str, server: str, m: Measurement) -> None:
        self.rounds.setdefault((endpoint, server), []).append(m)

    def median(self, endpoint: str, server: str, attr: str) -> float:
        return statistics.median(getattr(m, attr) for m in self.rounds[(endpoint, server)])

    def ratio(self, endpoint: str) -> float:
        return self.median(endpoint, "full", "rps") / self.median(endpoint, "bare", "rps")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def executable(name: str) -> str:
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if not found:
        raise BenchError(f"{name} not found next to {sys.executable} nor on PATH")
    return found


def start(name: str, cmd: list[str], env: dict[str, str], log: Path) -> Process:
    with log.open("wb") as out:
        popen = subprocess.Popen(
            cmd, cwd=ROOT, env={**os.environ, **env}, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    return Process(name, popen, log)


def stop(process: Process) -> None:
    """SIGINT first: uvicorn then returns normally, so the embedded PostgreSQL handle's atexit
    hook stops the database (after SIGTERM uvicorn re-raises the signal and atexit never runs)."""
    for sig, grace in ((signal.SIGINT, 30), (signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        if process.popen.poll() is not None:
            return
        process.popen.send_signal(sig)
        with suppress(subprocess.TimeoutExpired):
            process.popen.wait(grace)


def stop_leftover_postgres(pgdata: Path) -> None:
    pid_file = pgdata / "postmaster.pid"
    with suppress(OSError, ValueError, IndexError):
        pid = int(pid_file.read_text().splitlines()[0])
        if str(pgdata) not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
            return
        os.kill(pid, signal.SIGINT)
        for _ in range(100):
            if not Path(f"/proc/{pid}").exists():
                return
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)


def tail(path: Path, lines: int = 30) -> str:
    with suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def listens(process: Process, port: int) -> bool:
    connections = psutil.Process(process.popen.pid).net_connections(kind="tcp")
    return any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in connections)


def wait_ready(process: Process, port: int, path: str, timeout: float = 180.0) -> None:
    """Until `path` answers 200 from this very process (not from a stranger on the port)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.popen.poll() is not None:
            raise BenchError(f"{process.name} exited early:\n{tail(process.log)}")
        with suppress(httpx.HTTPError):
            response = httpx.get(f"http://127.0.0.1:{port}{path}", timeout=2.0)
            if response.status_code == 200 and listens(process, port):
                return
        time.sleep(0.25)
    raise BenchError(
        f"{process.name} did not answer {path} in {timeout:.0f}s:\n{tail(process.log)}"
    )


def expect(response: httpx.Response, status: int) -> dict[str, Any]:
    if response.status_code != status:
        raise BenchError(
            f"{response.request.method} {response.request.url} -> {response.status_code}: "
            f"{response.text[:500]}"
        )
    body: dict[str, Any] = response.json()
    return body


def upload_files(client: httpx.Client, kb_id: int, count: int) -> None:
    """`count` files through the three upload steps, as a client adds them."""
    for i in range(count):
        name, content_type, size = f"report-{i:03d}.pdf", "application/pdf", 10_000 + i
        upload = expect(
            client.post(
                "/upload/presigned",
                json={"fileName": name, "contentType": content_type, "fileSize": size},
            ),
            200,
        )
        # The association checks that the bytes were uploaded, and their size.
        put = httpx.put(upload["uploadUrl"], content=bytes(size), headers=upload["headers"])
        expect(put, 200)
        body = {
            "kbId": kb_id,
            "fileId": upload["fileId"],
            "fileName": name,
            "fileKey": upload["fileKey"],
            "contentKey": upload["contentKey"],
            "contentType": content_type,
            "fileSize": size,
        }
        expect(client.post("/kb/files", json=body), 201)


def create_knowledge_bases(client: httpx.Client, count: int) -> list[int]:
    return [
        int(
            expect(client.post("/kb/manage", json={"name": f"Bench KB {i:04d}"}), 201)[
                "knowledgeBase"
            ]["id"]
        )
        for i in range(count)
    ]


BULK_FILES = """
    INSERT INTO knowledge_base_files (org_id, knowledge_base_id, file_id, file_name, file_key,
        content_key, content_type, file_size, processing_status, created_at, updated_at)
    SELECT $1::text, $2::bigint, g.u, format('scan-%s.pdf', g.i),
           format('orgs/%s/files/%s/scan-%s.pdf', $1::text, g.u, g.i),
           format('orgs/%s/files/%s/content.md', $1::text, g.u), 'application/pdf',
           20000 + g.i, 'completed', now() - make_interval(secs => g.i),
           now() - make_interval(secs => g.i)
    FROM (SELECT i, gen_random_uuid() AS u FROM generate_series(1, $3::int) i) g"""


def bulk_files(pgdata: Path, kb_id: int, count: int) -> None:
    """`count` file records in one statement as the owner (over HTTP it would take minutes);
    the roll-up trigger keeps the knowledge base's totals as for any other insert."""

    async def insert() -> None:
        conn = await asyncpg.connect(host=str(pgdata), user="postgres", database="agent_platform")
        try:
            await conn.execute(BULK_FILES, ORG_ID, kb_id, count)
        finally:
            await conn.close()

    asyncio.run(insert())


def seed(base_url: str, tokens: dict[str, str], pgdata: Path) -> tuple[int, int]:
    """1,000 knowledge bases in `ORG_ID`, 500 files uploaded into the first and 10,000 file
    records in the second; 50 knowledge bases in `SMALL_ORG_ID`. The two knowledge bases' ids."""
    for org, count in ((ORG_ID, KB_COUNT), (SMALL_ORG_ID, SMALL_KB_COUNT)):
        headers = {"Authorization": f"Bearer {tokens[org]}"}
        with httpx.Client(base_url=base_url, headers=headers, timeout=30.0) as client:
            kb_ids = create_knowledge_bases(client, count)
            if org == ORG_ID:
                files_kb, big_kb = kb_ids[0], kb_ids[1]
                upload_files(client, files_kb, FILE_COUNT)
    bulk_files(pgdata, big_kb, BIG_FILE_COUNT)
    return files_kb, big_kb


def deep_cursor(base_url: str, token: str, kb_id: int) -> str:
    """The service's own cursor after the first `DEEP_PAGE_AFTER` files."""
    cursor = ""
    headers = {"Authorization": f"Bearer {token}"}
    for _ in range(DEEP_PAGE_AFTER // 1000):
        params = {"kbId": str(kb_id), "limit": "1000", **({"cursor": cursor} if cursor else {})}
        body = expect(httpx.get(f"{base_url}/kb/files", params=params, headers=headers), 200)
        cursor = body["nextCursor"]
    return cursor


def first_difference(a: Any, b: Any, path: str = "$") -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(a.keys() | b.keys()):
            found = first_difference(a.get(key), b.get(key), f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


def analyze(pgdata: Path) -> None:
    """Fresh planner statistics, so that the first round does not run with the plans chosen
    for empty tables while autovacuum has yet to notice the seeded rows."""

    async def run() -> None:
        conn = await asyncpg.connect(host=str(pgdata), user="postgres", database="agent_platform")
        try:
            await conn.execute(
                "VACUUM ANALYZE knowledge_bases, knowledge_base_files, knowledge_base_stats"
            )
        finally:
            await conn.close()

    asyncio.run(run())


EXPECTED_ITEMS = {
    "files": FILE_COUNT,
    "page": PAGE,
    "page_deep": PAGE,
    "manage": KB_COUNT,
    "manage_small": SMALL_KB_COUNT,
}


def check_same_bodies(urls: dict[str, dict[str, str]], tokens: dict[str, str]) -> dict[str, int]:
    """Both servers return the same JSON for every endpoint; returns the full bodies' sizes."""
    sizes = {}
    for endpoint in ENDPOINTS:
        headers = {"Authorization": f"Bearer {tokens[endpoint]}"}
        full = httpx.get(urls["full"][endpoint], headers=headers)
        bare = httpx.get(urls["bare"][endpoint])
        full_body, bare_body = expect(full, 200), expect(bare, 200)
        items = full_body.get("files", full_body.get("knowledgeBases"))
        wanted = EXPECTED_ITEMS[endpoint]
        if not isinstance(items, list) or len(items) != wanted:
            raise BenchError(f"{endpoint}: expected {wanted} items in {urls['full'][endpoint]}")
        difference = first_difference(full_body, bare_body)
        if difference:
            raise BenchError(f"{endpoint}: bodies differ (service, bare) at {difference}")
        sizes[endpoint] = len(full.content)
    return sizes


def wrk(
    url: str, token: str | None, args: argparse.Namespace, duration: float, *, clients: int = 0
) -> Measurement:
    """One wrk run; `clients` 1 for the one-client latency runs, else `--connections`."""
    threads, connections = (1, 1) if clients == 1 else (args.threads, args.connections)
    cmd = [
        "wrk", f"-t{threads}", f"-c{connections}", f"-d{duration:g}s",
        "--timeout", "10s", "-s", str(LUA_SCRIPT), url,
    ]  # fmt: skip
    env = {**os.environ, "BENCH_TOKEN": token or ""}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    line = next((x for x in done.stdout.splitlines() if x.startswith("BENCH ")), None)
    if done.returncode != 0 or line is None:
        raise BenchError(f"wrk failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    figures = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}
    errors = {
        k.removesuffix("_errors"): figures[k]
        for k in ("connect_errors", "read_errors", "write_errors", "status_errors", "timeouts")
        if figures[k]
    }
    if errors.get("status"):
        raise BenchError(f"wrk saw {errors['status']} non-2xx responses from {url}")
    return Measurement(
        requests=figures["requests"],
        seconds=figures["duration_us"] / 1e6,
        p50_ms=figures["p50_us"] / 1000,
        p99_ms=figures["p99_us"] / 1000,
        errors=errors,
    )


def measure(
    urls: dict[str, dict[str, str]], tokens: dict[str, str], args: argparse.Namespace
) -> tuple[Results, Results]:
    """Throughput at `--connections`, then one-client latency, per round; both servers in
    turn, their order alternating between rounds."""

    def token(server: str, endpoint: str) -> str | None:
        return tokens[endpoint] if server == "full" else None

    for endpoint in ENDPOINTS:
        for server in SERVERS:
            print(f"warm-up  {endpoint:12} {server} ({args.warmup:g}s)", flush=True)
            wrk(urls[server][endpoint], token(server, endpoint), args, args.warmup)
    loaded, alone = Results(), Results()
    for r in range(args.rounds):
        order = SERVERS if r % 2 == 0 else SERVERS[::-1]
        for endpoint in ENDPOINTS:
            for server in order:
                m = wrk(urls[server][endpoint], token(server, endpoint), args, args.duration)
                loaded.add(endpoint, server, m)
                errors = f"  errors {m.errors}" if m.errors else ""
                print(
                    f"round {r + 1}  {endpoint:12} {server}  {m.rps:8.1f} req/s  "
                    f"p50 {m.p50_ms:7.2f} ms  p99 {m.p99_ms:7.2f} ms{errors}",
                    flush=True,
                )
        for endpoint in LATENCY_TARGETS_MS:
            for server in order:
                m = wrk(
                    urls[server][endpoint], token(server, endpoint), args,
                    args.latency_duration, clients=1,
                )  # fmt: skip
                alone.add(endpoint, server, m)
                print(
                    f"round {r + 1}  {endpoint:12} {server}  one client: p50 {m.p50_ms:6.2f} ms"
                    f"  p99 {m.p99_ms:6.2f} ms",
                    flush=True,
                )
    return loaded, alone


def machine() -> dict[str, str]:
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.MULTILINE)
    meminfo = re.search(r"^MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text(), re.MULTILINE)
    wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True, check=False)
    return {
        "nproc": str(len(os.sched_getaffinity(0))),
        "cpu": model.group(1).strip() if model else platform.processor() or "unknown",
        "memory": f"{int(meminfo.group(1)) / 1024**2:.1f} GiB" if meminfo else "unknown",
        "kernel": platform.release(),
        "python": platform.python_version(),
        "wrk": (wrk_version.stdout or wrk_version.stderr).splitlines()[0].split(" [")[0],
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def table(loaded: Results, alone: Results) -> list[str]:
    rows = [
        "Throughput, {connections} connections:",
        "",
        "| Endpoint | Server | req/s | p50 (ms) | p99 (ms) |",
        "|---|---|---:|---:|---:|",
    ]
    for endpoint, label in ENDPOINTS.items():
        for server in SERVERS:
            rows.append(
                f"| {label} | {server} | {loaded.median(endpoint, server, 'rps'):.0f} | "
                f"{loaded.median(endpoint, server, 'p50_ms'):.2f} | "
                f"{loaded.median(endpoint, server, 'p99_ms'):.2f} |"
            )
    rows += ["", "| Endpoint | full / bare req/s | Target | Result |", "|---|---:|---:|---|"]
    for endpoint, label in ENDPOINTS.items():
        ratio = loaded.ratio(endpoint)
        verdict = "PASS" if ratio >= TARGET else "FAIL"
        rows.append(f"| {label} | {ratio:.0%} | ≥ {TARGET:.0%} | {verdict} |")
    rows += [
        "",
        "One client (`-t1 -c1`), latency as wrk measures it (loopback, request sent to response "
        "read):",
        "",
        "| Endpoint | full p50 (ms) | full p99 (ms) | bare p50 (ms) | Target (full p50) | Result |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for endpoint, target in LATENCY_TARGETS_MS.items():
        p50 = alone.median(endpoint, "full", "p50_ms")
        rows.append(
            f"| {ENDPOINTS[endpoint]} | {p50:.2f} | {alone.median(endpoint, 'full', 'p99_ms'):.2f}"
            f" | {alone.median(endpoint, 'bare', 'p50_ms'):.2f} | < {target:g} ms | "
            f"{'PASS' if p50 < target else 'FAIL'} |"
        )
    return rows


def rounds_table(loaded: Results, alone: Results) -> list[str]:
    rows = ["| Endpoint | Server | req/s per round | p50 (ms) per round | p99 (ms) per round |"]
    rows.append("|---|---|---|---|---|")
    for endpoint in ENDPOINTS:
        for server in SERVERS:
            ms = loaded.rounds[(endpoint, server)]
            rows.append(
                f"| {endpoint} | {server} | {', '.join(f'{m.rps:.0f}' for m in ms)} | "
                f"{', '.join(f'{m.p50_ms:.2f}' for m in ms)} | "
                f"{', '.join(f'{m.p99_ms:.2f}' for m in ms)} |"
            )
    for endpoint in LATENCY_TARGETS_MS:
        for server in SERVERS:
            ms = alone.rounds[(endpoint, server)]
            rows.append(
                f"| {endpoint}, one client | {server} | {', '.join(f'{m.rps:.0f}' for m in ms)}"
                f" | {', '.join(f'{m.p50_ms:.2f}' for m in ms)} | "
                f"{', '.join(f'{m.p99_ms:.2f}' for m in ms)} |"
            )
    errors = [
        f"{endpoint}/{server} round {i + 1}: {m.errors}"
        for results in (loaded, alone)
        for (endpoint, server), ms in results.rounds.items()
        for i, m in enumerate(ms)
        if m.errors
    ]
    if errors:
        rows += ["", "Socket errors reported by wrk: " + "; ".join(errors) + "."]
    return rows


def section(
    loaded: Results,
    alone: Results,
    args: argparse.Namespace,
    info: dict[str, str],
    sizes: dict[str, int],
) -> str:
    command = shlex.join([os.path.relpath(sys.executable, ROOT), "bench/kb_endpoints.py"])
    command += "".join(f" {a}" for a in sys.argv[1:])
    body_sizes = ", ".join(f"{e} {sizes[e] / 1024:.0f} KiB" for e in ENDPOINTS)
    lines = [
        f"## {SECTION_TITLE}",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with `{command}` (from the repository "
        "root).",
        "",
        f"- Machine: {info['nproc']} CPUs (nproc), {info['cpu']}, {info['memory']} RAM, "
        f"Linux {info['kernel']}, Python {info['python']}; load average at start "
        f"{info['load']}. The servers, PostgreSQL and wrk share these CPUs.",
        f"- Load: {info['wrk']}, `-t{args.threads} -c{args.connections} -d{args.duration:g}s` "
        f"over loopback, one server at a time; a {args.warmup:g}s warm-up per target, then "
        f"{args.rounds} interleaved rounds, each also timing one client (`-t1 -c1 "
        f"-d{args.latency_duration:g}s`) on the endpoints with a latency target; the figures "
        "are the medians over the rounds.",
        f"- Data: organization `{ORG_ID}` with {KB_COUNT:,} knowledge bases, {FILE_COUNT} files "
        f"uploaded over HTTP into one of them and {BIG_FILE_COUNT:,} file records inserted "
        "as the owner into another (one statement; the trigger keeps the totals as for any "
        f"insert); organization `{SMALL_ORG_ID}` with {SMALL_KB_COUNT} knowledge bases. serve "
        "runs without its worker child (`AP_WORKER_IN_PROCESS=false`), so nothing changes a "
        f"file between the two servers' reads. Response bodies: {body_sizes}; identical on "
        "both servers.",
        "- full: `agent-platform serve` on embedded PostgreSQL 18 (one uvicorn worker, "
        f"litestar {version('litestar')}, dishka {version('dishka')}, asyncpg "
        f"{version('asyncpg')}) with `AP_LOG_FORMAT=json` as deployed: bearer JWT check "
        "(verified tokens cached up to a minute), request-scoped container, just-in-time "
        "member record (cached), an organization-scoped connection from a fair gate in front "
        "of a pool of 20 (app role, session-level `set_config('app.org_id')` on checkout, "
        "row-level security), an access-log line and the metrics middleware. Per request it "
        "sends the scope (with the member's removal check) and the SELECT(s): 3 statements "
        "for files (knowledge-base lookup, then the listing or page), 2 for manage (totals "
        "read from `knowledge_base_stats`); reads run without a transaction, and the "
        "connection goes back to the pool without a reset.",
        "- bare: `bench/bare_app.py` (one uvicorn worker): Litestar handler, one asyncpg pool as "
        "the superuser, the same SELECTs with `org_id` in the WHERE clause (files: the "
        "knowledge-base lookup, then the listing or page; manage: one), then asyncpg's reset "
        "as the connection goes back to the pool: 3 statements for files, 2 for manage, as "
        "the service; each response struct built from its record by column name, msgspec "
        "encoding; no transaction, no row-level security, no auth, no DI, no log.",
        "",
        *[row.replace("{connections}", str(args.connections)) for row in table(loaded, alone)],
        "",
        "Per round:",
        "",
        *rounds_table(loaded, alone),
        "",
    ]
    return "\n".join(lines)


def write_section(path: Path, title: str, text: str) -> None:
    """Replace the `## title` section (up to the next `## `) or append it; the file is read
    right before writing, so other benchmarks' sections written meanwhile are kept."""
    current = path.read_text() if path.exists() else ""
    if not current.strip():
        current = (
            f"{REPORT_TITLE}\n\nOne section per benchmark; re-running a benchmark rewrites only "
            "its own section.\n"
        )
    lines = current.splitlines(keepends=True)
    heading = f"## {title}"
    start = next((i for i, x in enumerate(lines) if x.rstrip() == heading), None)
    if start is None:
        path.write_text(current.rstrip("\n") + "\n\n" + text)
        return
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    rest = "".join(lines[end:])
    path.write_text("".join(lines[:start]) + text + ("\n" + rest if rest else ""))


def report(title: str, text: str, ok: bool, *, write: bool) -> int:
    """Print a benchmark's section and, with `write`, put it into BENCHMARKS.md; the exit
    status: 0 when every target is met, 1 when one is missed."""
    print()
    print(text)
    if write:
        write_section(REPORT, title, text)
        print(f"written to {REPORT}")
    return 0 if ok else 1


def token_for(org: str, env: dict[str, str]) -> str:
    return subprocess.run(
        [executable("agent-platform"), "token", "--org", org, "--user", "u1",
         "--role", "admin", "--ttl", "86400"],
        env={**os.environ, **env}, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


def run(args: argparse.Namespace) -> int:
    info = machine()
    started: list[Process] = []
    with tempfile.TemporaryDirectory(prefix="ap-bench-") as tmp:
        data_dir = Path(tmp).resolve()
        pgdata = data_dir / "pgdata"
        try:
            full_port, bare_port = free_port(), free_port()
            env = {
                "AP_DATA_DIR": str(data_dir),
                "AP_PORT": str(full_port),
                # The files stay as seeded, as both servers must list them alike.
                "AP_WORKER_IN_PROCESS": "false",
                "AP_LOG_FORMAT": "json",
            }
            print(f"starting agent-platform serve on :{full_port} (data dir {data_dir})")
            started.append(
                start("serve", [executable("agent-platform"), "serve"], env, data_dir / "serve.log")
            )
            full_url = f"http://127.0.0.1:{full_port}"
            wait_ready(started[0], full_port, "/health")
            org_tokens = {org: token_for(org, env) for org in (ORG_ID, SMALL_ORG_ID)}
            print(
                f"seeding {KB_COUNT:,} + {SMALL_KB_COUNT} knowledge bases, {FILE_COUNT} files "
                f"over HTTP and {BIG_FILE_COUNT:,} file records"
            )
            files_kb, big_kb = seed(full_url, org_tokens, pgdata)
            analyze(pgdata)
            cursor = deep_cursor(full_url, org_tokens[ORG_ID], big_kb)
            print(f"starting bench/bare_app.py on :{bare_port}")
            bare_env = {"BENCH_PG_HOST": str(pgdata), "BENCH_ORG_ID": ORG_ID}
            cmd = [sys.executable, str(BENCH_DIR / "bare_app.py"), "--port", str(bare_port)]
            started.append(start("bare", cmd, bare_env, data_dir / "bare.log"))
            bare_url = f"http://127.0.0.1:{bare_port}"
            wait_ready(started[1], bare_port, "/kb/manage")
            paths = {
                "files": f"/kb/files?kbId={files_kb}",
                "page": f"/kb/files?kbId={big_kb}&limit={PAGE}",
                "page_deep": f"/kb/files?kbId={big_kb}&limit={PAGE}&cursor={cursor}",
                "manage": "/kb/manage",
                "manage_small": "/kb/manage",
            }
            bare_paths = {**paths, "manage_small": f"/kb/manage?org={SMALL_ORG_ID}"}
            urls = {
                "full": {e: full_url + p for e, p in paths.items()},
                "bare": {e: bare_url + p for e, p in bare_paths.items()},
            }
            tokens = {e: org_tokens[ORG_ID] for e in ENDPOINTS}
            tokens["manage_small"] = org_tokens[SMALL_ORG_ID]
            sizes = check_same_bodies(urls, tokens)
            loaded, alone = measure(urls, tokens, args)
        except BaseException:
            for process in started:
                print(f"--- {process.name} log (tail) ---\n{tail(process.log)}", file=sys.stderr)
            raise
        finally:
            for process in reversed(started):
                stop(process)
            stop_leftover_postgres(pgdata)

    text = section(loaded, alone, args, info, sizes)
    ok = all(loaded.ratio(e) >= TARGET for e in ENDPOINTS) and all(
        alone.median(e, "full", "p50_ms") < target for e, target in LATENCY_TARGETS_MS.items()
    )
    return report(SECTION_TITLE, text, ok, write=not args.no_write)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per measurement")
    parser.add_argument(
        "--latency-duration", type=float, default=5.0, help="seconds per one-client run"
    )
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds per warm-up run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print(
            "wrk is not installed. On Debian/Ubuntu: sudo apt-get update && "
            "sudo apt-get install -y wrk (or build it from https://github.com/wg/wrk).",
            file=sys.stderr,
        )
        return 2
    try:
        return run(args)
    except BenchError as error:
        print(f"benchmark failed: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
