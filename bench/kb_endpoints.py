"""Throughput and latency of `GET /kb/files?kbId=` (500 files) and `GET /kb/manage` (50 knowledge
bases) in the real service, side by side with a bare Litestar + asyncpg + msgspec app
(`bench/bare_app.py`) that runs the same SQL on the same embedded PostgreSQL.

    .venv/bin/python bench/kb_endpoints.py [--rounds 3] [--duration 10] [--connections 32]

Starts `agent-platform serve` on a temporary data dir, seeds it over HTTP, starts the bare app,
checks that both return the same bodies, then loads one server at a time with wrk (warm-up,
then interleaved rounds) and reports medians. The result goes to stdout and to this
benchmark's section of BENCHMARKS.md. The target: the full endpoint reaches at least 60% of
the bare endpoint's throughput.
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
KB_COUNT = 50
FILE_COUNT = 500
TARGET = 0.60
ENDPOINTS = {
    "files": f"GET /kb/files?kbId=… ({FILE_COUNT} files)",
    "manage": f"GET /kb/manage ({KB_COUNT} knowledge bases)",
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


def seed(base_url: str, token: str) -> int:
    """50 knowledge bases in the organization; the 500 files all go to the first one."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=30.0) as client:
        kb_ids = [
            expect(client.post("/kb/manage", json={"name": f"Bench KB {i:02d}"}), 201)[
                "knowledgeBase"
            ]["id"]
            for i in range(KB_COUNT)
        ]
        kb_id = int(kb_ids[0])
        for i in range(FILE_COUNT):
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
    return kb_id


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
            await conn.execute("VACUUM ANALYZE knowledge_bases, knowledge_base_files")
        finally:
            await conn.close()

    asyncio.run(run())


def check_same_bodies(urls: dict[str, dict[str, str]], token: str) -> dict[str, int]:
    """Both servers return the same JSON for both endpoints; returns the full bodies' sizes."""
    sizes = {}
    for endpoint in ENDPOINTS:
        full = httpx.get(urls["full"][endpoint], headers={"Authorization": f"Bearer {token}"})
        bare = httpx.get(urls["bare"][endpoint])
        full_body, bare_body = expect(full, 200), expect(bare, 200)
        items = full_body.get("files", full_body.get("knowledgeBases"))
        wanted = FILE_COUNT if endpoint == "files" else KB_COUNT
        if not isinstance(items, list) or len(items) != wanted:
            raise BenchError(f"{endpoint}: expected {wanted} items in {urls['full'][endpoint]}")
        difference = first_difference(full_body, bare_body)
        if difference:
            raise BenchError(f"{endpoint}: bodies differ (service, bare) at {difference}")
        sizes[endpoint] = len(full.content)
    return sizes


def wrk(url: str, token: str | None, args: argparse.Namespace, duration: float) -> Measurement:
    cmd = [
        "wrk", f"-t{args.threads}", f"-c{args.connections}", f"-d{duration:g}s",
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


def measure(urls: dict[str, dict[str, str]], token: str, args: argparse.Namespace) -> Results:
    for endpoint in ENDPOINTS:
        for server in SERVERS:
            print(f"warm-up  {endpoint:6} {server} ({args.warmup:g}s)", flush=True)
            wrk(urls[server][endpoint], token if server == "full" else None, args, args.warmup)
    results = Results()
    for r in range(args.rounds):
        order = SERVERS if r % 2 == 0 else SERVERS[::-1]
        for endpoint in ENDPOINTS:
            for server in order:
                m = wrk(urls[server][endpoint], token if server == "full" else None, args,
                        args.duration)  # fmt: skip
                results.add(endpoint, server, m)
                errors = f"  errors {m.errors}" if m.errors else ""
                print(
                    f"round {r + 1}  {endpoint:6} {server}  {m.rps:8.1f} req/s  "
                    f"p50 {m.p50_ms:7.2f} ms  p99 {m.p99_ms:7.2f} ms{errors}",
                    flush=True,
                )
    return results


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


def table(results: Results) -> list[str]:
    rows = [
        "| Endpoint | Server | req/s | p50 (ms) | p99 (ms) |",
        "|---|---|---:|---:|---:|",
    ]
    for endpoint, label in ENDPOINTS.items():
        for server in SERVERS:
            rows.append(
                f"| {label} | {server} | {results.median(endpoint, server, 'rps'):.0f} | "
                f"{results.median(endpoint, server, 'p50_ms'):.2f} | "
                f"{results.median(endpoint, server, 'p99_ms'):.2f} |"
            )
    rows += ["", "| Endpoint | full / bare req/s | Target | Result |", "|---|---:|---:|---|"]
    for endpoint, label in ENDPOINTS.items():
        ratio = results.ratio(endpoint)
        verdict = "PASS" if ratio >= TARGET else "FAIL"
        rows.append(f"| {label} | {ratio:.0%} | ≥ {TARGET:.0%} | {verdict} |")
    return rows


def rounds_table(results: Results) -> list[str]:
    rows = ["| Endpoint | Server | req/s per round | p50 (ms) per round | p99 (ms) per round |"]
    rows.append("|---|---|---|---|---|")
    for endpoint in ENDPOINTS:
        for server in SERVERS:
            ms = results.rounds[(endpoint, server)]
            rows.append(
                f"| {endpoint} | {server} | {', '.join(f'{m.rps:.0f}' for m in ms)} | "
                f"{', '.join(f'{m.p50_ms:.2f}' for m in ms)} | "
                f"{', '.join(f'{m.p99_ms:.2f}' for m in ms)} |"
            )
    errors = [
        f"{endpoint}/{server} round {i + 1}: {m.errors}"
        for (endpoint, server), ms in results.rounds.items()
        for i, m in enumerate(ms)
        if m.errors
    ]
    if errors:
        rows += ["", "Socket errors reported by wrk: " + "; ".join(errors) + "."]
    return rows


def section(
    results: Results, args: argparse.Namespace, info: dict[str, str], sizes: dict[str, int]
) -> str:
    command = shlex.join([os.path.relpath(sys.executable, ROOT), "bench/kb_endpoints.py"])
    command += "".join(f" {a}" for a in sys.argv[1:])
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
        f"{args.rounds} interleaved rounds; the figures are the medians over the rounds.",
        f"- Data: organization `{ORG_ID}` with {KB_COUNT} knowledge bases, {FILE_COUNT} files "
        f"in one of them (status `parsing`: serve runs without its worker child, "
        "`AP_WORKER_IN_PROCESS=false`, since 2026-11-23; before, the worker could change a "
        "file between the two servers' reads); response bodies "
        f"{sizes['files'] / 1024:.0f} KiB (files) and {sizes['manage'] / 1024:.0f} KiB "
        "(manage), identical on both servers.",
        "- full: `agent-platform serve` on embedded PostgreSQL 18 (one uvicorn worker, "
        f"litestar {version('litestar')}, dishka {version('dishka')}, asyncpg "
        f"{version('asyncpg')}): bearer JWT check (verified tokens cached up to a minute), "
        "request-scoped container, just-in-time member record (cached), an organization-scoped "
        "connection from a fair gate in front of a pool of 20 (app role, session-level "
        "`set_config('app.org_id')` on checkout, row-level security), access log (default "
        "console format). Per request it sends `set_config` and the SELECT(s): 3 statements "
        "for files (knowledge-base lookup, then the listing), 2 for manage; reads run "
        "without a transaction.",
        "- bare: `bench/bare_app.py` (one uvicorn worker): Litestar handler, one asyncpg pool as "
        "the superuser, the same SELECTs with `org_id` in the WHERE clause (for files: the "
        "knowledge-base lookup, then the listing: 2 statements; manage: 1), msgspec encoding; "
        "no transaction, no auth, no DI.",
        "",
        *table(results),
        "",
        "Per round:",
        "",
        *rounds_table(results),
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
                # The files stay `parsing`, as both servers must list them alike.
                "AP_WORKER_IN_PROCESS": "false",
            }
            print(f"starting agent-platform serve on :{full_port} (data dir {data_dir})")
            started.append(
                start("serve", [executable("agent-platform"), "serve"], env, data_dir / "serve.log")
            )
            full_url = f"http://127.0.0.1:{full_port}"
            wait_ready(started[0], full_port, "/health")
            token = subprocess.run(
                [executable("agent-platform"), "token", "--org", ORG_ID, "--user", "u1",
                 "--role", "admin", "--ttl", "86400"],
                env={**os.environ, **env}, capture_output=True, text=True, check=True,
            ).stdout.strip()  # fmt: skip
            print(f"seeding {KB_COUNT} knowledge bases and {FILE_COUNT} files over HTTP")
            kb_id = seed(full_url, token)
            analyze(pgdata)
            print(f"starting bench/bare_app.py on :{bare_port}")
            bare_env = {"BENCH_PG_HOST": str(pgdata), "BENCH_ORG_ID": ORG_ID}
            cmd = [sys.executable, str(BENCH_DIR / "bare_app.py"), "--port", str(bare_port)]
            started.append(start("bare", cmd, bare_env, data_dir / "bare.log"))
            bare_url = f"http://127.0.0.1:{bare_port}"
            wait_ready(started[1], bare_port, "/kb/manage")
            paths = {"files": f"/kb/files?kbId={kb_id}", "manage": "/kb/manage"}
            urls = {
                "full": {e: full_url + p for e, p in paths.items()},
                "bare": {e: bare_url + p for e, p in paths.items()},
            }
            sizes = check_same_bodies(urls, token)
            results = measure(urls, token, args)
        except BaseException:
            for process in started:
                print(f"--- {process.name} log (tail) ---\n{tail(process.log)}", file=sys.stderr)
            raise
        finally:
            for process in reversed(started):
                stop(process)
            stop_leftover_postgres(pgdata)

    text = section(results, args, info, sizes)
    ok = all(results.ratio(e) >= TARGET for e in ENDPOINTS)
    return report(SECTION_TITLE, text, ok, write=not args.no_write)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per measurement")
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
