"""What the benchmarks share, so that each keeps only what it measures: starting and stopping
processes (`agent-platform serve` with or without its worker, the scripted provider, the embedded
PostgreSQL alone), tokens, the owner's database connection, the machine description, process
sampling, statistics, wrk, streamed chats and the paired-rounds loop, the BENCHMARKS.md section
writer and `run`, the end of every benchmark's `main()`. See bench/README.md."""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import platform as platform_module
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import psutil

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
BENCHMARKS_FILE = ROOT / "BENCHMARKS.md"
DATABASE = "agent_platform"
ORG_ID = "org_bench"
TOKEN_TTL = 86400


class BenchError(Exception):
    """The benchmark could not run (exit status 2)."""


# processes --------------------------------------------------------------------------------
@dataclass
class Process:
    """A process a benchmark started, its output in `log` (and its URL, when it serves one)."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    url: str = ""

    def stop(self) -> None:
        """SIGINT first: uvicorn then returns normally, so the embedded PostgreSQL handle's
        atexit hook stops the database (after SIGTERM uvicorn re-raises the signal and atexit
        never runs)."""
        for sig, grace in ((signal.SIGINT, 30), (signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            if self.popen.poll() is not None:
                return
            self.popen.send_signal(sig)
            with suppress(subprocess.TimeoutExpired):
                self.popen.wait(grace)

    def logs(self) -> str:
        return f"--- {self.name} log (tail) ---\n{tail(self.log)}"


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def executable(name: str) -> str:
    """A console script of the virtualenv this Python runs in (else from PATH)."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if not found:
        raise BenchError(f"{name} not found next to {sys.executable} nor on PATH")
    return found


def start(
    name: str, cmd: list[str], env: dict[str, str], log: Path, *, pipe: bool = False
) -> Process:
    """`cmd` from the repository root with `env` added to ours; its output goes to `log` (with
    `pipe`, only its stderr: stdout is the caller's to read)."""
    with log.open("wb") as out:
        stdout, stderr = (subprocess.PIPE, out) if pipe else (out, subprocess.STDOUT)
        env = {**os.environ, **env}
        popen = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr
        )
    return Process(name, popen, log)


def stop_leftover_postgres(pgdata: Path) -> None:
    """Stop an embedded PostgreSQL on `pgdata` that outlived the process that started it."""
    with suppress(OSError, ValueError, IndexError):
        pid = int((pgdata / "postmaster.pid").read_text().splitlines()[0])
        if str(pgdata) not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
            return
        os.kill(pid, signal.SIGINT)
        for _ in range(100):
            if not Path(f"/proc/{pid}").exists():
                return
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)


def tail(path: Path, lines: int = 30) -> str:
    """The last `lines` lines of a log, for a failure's report."""
    with suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def wait_ready(process: Process, port: int, path: str, timeout: float = 180.0) -> None:
    """Until `path` answers 200 from this very process (not from a stranger on the port)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.popen.poll() is not None:
            raise BenchError(f"{process.name} exited early:\n{tail(process.log)}")
        with suppress(httpx.HTTPError):
            response = httpx.get(f"http://127.0.0.1:{port}{path}", timeout=2.0)
            if response.status_code == 200 and _listens(process, port):
                return
        time.sleep(0.25)
    raise BenchError(
        f"{process.name} did not answer {path} in {timeout:.0f}s:\n{tail(process.log)}"
    )


def _listens(process: Process, port: int) -> bool:
    connections = psutil.Process(process.popen.pid).net_connections(kind="tcp")
    return any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in connections)


@dataclass
class Platform:
    """`agent-platform serve` on its own data dir (embedded PostgreSQL)."""

    data_dir: Path
    process: Process
    port: int
    env: dict[str, str]
    _issuer: Any = None

    @classmethod
    def start(cls, data_dir: Path, env: dict[str, str], *, worker: bool = True) -> Platform:
        """serve with `env`; without `worker`, with `AP_WORKER_IN_PROCESS=false` (no job
        worker child), as the benchmarks that keep the data as seeded run it."""
        port = free_port()
        env = {"AP_DATA_DIR": str(data_dir), "AP_PORT": str(port), **env}
        if not worker:
            env["AP_WORKER_IN_PROCESS"] = "false"
        data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [executable("agent-platform"), "serve"]
        process = start("serve", cmd, env, data_dir / "serve.log")
        platform = cls(data_dir, process, port, env)
        wait_ready(process, port, "/health")
        return platform

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pgdata"

    def token(self, user: str, role: str = "member", org: str = ORG_ID) -> str:
        """A bearer token from serve's own development identity provider (its key in the data
        dir), as `agent-platform token` issues it."""
        from adapters.identity.dev_provider import DevIdentityProvider

        if self._issuer is None:
            self._issuer = DevIdentityProvider(self.data_dir / "dev-idp" / "signing-key.pem")
        return str(self._issuer.issue(user_id=user, org_id=org, role=role, ttl=TOKEN_TTL))

    def create_agent(self, token: str, body: dict[str, Any]) -> int:
        response = httpx.post(f"{self.url}/agents", json=body, headers=bearer(token), timeout=30.0)
        return int(expect(response, 201)["agent"]["id"])

    def stop(self) -> None:
        self.process.stop()
        stop_leftover_postgres(self.pgdata)

    def logs(self) -> str:
        return self.process.logs()


class Rig:
    """A benchmark's temporary directory and the processes it starts there: when the `with`
    block ends they are stopped, last started first, and the directory removed; when it ends
    with an exception, the tail of each one's log goes to stderr first."""

    def __init__(self, prefix: str) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix=prefix)
        self.dir = Path(self._tmp.name).resolve()
        self.started: list[Process | Platform] = []
        self.closing: list[Callable[[], object]] = []  # clients and servers of the benchmark's own

    def __enter__(self) -> Rig:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is not None:
            for item in self.started:
                print(item.logs(), file=sys.stderr)
        try:
            while self.closing:
                self.closing.pop()()
            while self.started:
                self.started.pop().stop()
        finally:
            self._tmp.cleanup()

    def stop(self, item: Process | Platform) -> None:
        self.started.remove(item)
        item.stop()

    def start(
        self, name: str, cmd: list[str], env: dict[str, str], *, pipe: bool = False
    ) -> Process:
        process = start(name, cmd, env, self.dir / f"{name}.log", pipe=pipe)
        self.started.append(process)
        return process

    def serve(self, env: dict[str, str], *, worker: bool = True, name: str = "") -> Platform:
        """`agent-platform serve` on a data dir of its own (`name`, else the rig's directory)."""
        data_dir = self.dir / name if name else self.dir
        print(f"starting agent-platform serve (data dir {data_dir})", flush=True)
        platform = Platform.start(data_dir, env, worker=worker)
        self.started.append(platform)
        return platform

    def provider(self, tokens: int, delay: float = 0.0, port: int = 0) -> Process:
        """`scripted_provider.py` on loopback (on `port`, else a free one), `url` set."""
        port = port or free_port()
        options = ["--port", str(port), "--tokens", str(tokens), "--delay", str(delay)]
        cmd = [sys.executable, str(BENCH_DIR / "scripted_provider.py"), *options]
        process = self.start(f"provider-{delay:g}", cmd, {})
        wait_ready(process, port, "/health", timeout=30)
        process.url = f"http://127.0.0.1:{port}"
        return process

    def scripted(
        self,
        args: argparse.Namespace,
        model: str,
        env: dict[str, str] | None = None,
        *,
        worker: bool = True,
        port: int = 0,
    ) -> tuple[Platform, Process]:
        """The scripted provider (`args.tokens` deltas an answer), then serve (`args.log_level`,
        `env`) with `openai:<model>` answered by it."""
        provider = self.provider(args.tokens, port=port)
        env = {**scripted_env(provider.url, model, args.log_level), **(env or {})}
        return self.serve(env, worker=worker), provider


def scripted_env(provider_url: str, model: str, log_level: str) -> dict[str, str]:
    """serve's settings for chats answered by the scripted provider (`openai:<model>`), and
    nothing else reaching the bundled model."""
    return {
        "AP_OPENAI_BASE_URL": f"{provider_url}/v1",
        "AP_OPENAI_API_KEY": "sk-bench-not-secret",
        "AP_DEFAULT_CHAT_MODEL": f"openai:{model}",
        "AP_LOG_LEVEL": log_level,
    }


# HTTP -------------------------------------------------------------------------------------
def bearer(token: str) -> dict[str, str]:
    """The `Authorization` header of a bearer token."""
    return {"Authorization": f"Bearer {token}"}


def expect(response: httpx.Response, status: int) -> Any:
    """The response's JSON, once its status is `status`."""
    if response.status_code != status:
        raise BenchError(
            f"{response.request.method} {response.request.url} -> {response.status_code}: "
            f"{response.text[:500]}"
        )
    return response.json()


def upload_file(
    client: httpx.Client, kb_id: int, name: str, content_type: str, data: bytes
) -> None:
    """One file through the three upload steps, as a client adds it: presign, PUT to the signed
    URL, associate with the knowledge base (which checks that the bytes are there)."""
    presign = {"fileName": name, "contentType": content_type, "fileSize": len(data)}
    upload = expect(client.post("/upload/presigned", json=presign), 200)
    headers = upload.get("headers") or {}
    expect(httpx.put(upload["uploadUrl"], content=data, headers=headers, timeout=60), 200)
    keys = {k: upload[k] for k in ("fileId", "fileKey", "contentKey")}
    body = {"kbId": kb_id, "fileName": name, "contentType": content_type, **keys}
    expect(client.post("/kb/files", json={**body, "fileSize": len(data)}), 201)


# the database -----------------------------------------------------------------------------
def postmaster(pgdata: Path) -> tuple[int, Path]:
    """The embedded server's pid and Unix socket directory (from `postmaster.pid`)."""
    lines = (pgdata / "postmaster.pid").read_text().splitlines()
    return int(lines[0]), Path(lines[4].strip() or pgdata)


def owner_url(pgdata: Path) -> str:
    """The superuser (schema owner) over the embedded server's socket: bypasses RLS."""
    return f"postgresql://postgres@/{DATABASE}?host={postmaster(pgdata)[1]}"


async def owner_connection(pgdata: Path) -> asyncpg.Connection:
    """A connection as the owner (see `owner_url`); the caller closes it."""
    connection: asyncpg.Connection = await asyncpg.connect(owner_url(pgdata))
    return connection


@asynccontextmanager
async def owner(pgdata: Path) -> AsyncIterator[asyncpg.Connection]:
    """A connection as the owner for the `async with` block."""
    connection = await owner_connection(pgdata)
    try:
        yield connection
    finally:
        await connection.close()


@asynccontextmanager
async def app_pool(url: str) -> AsyncIterator[asyncpg.Pool]:
    """A pool of 2 connections as the service builds them: the app role (row-level security),
    each checkout scoped to an organization by `org_connection`."""
    from adapters.postgres.database import create_pool

    pool = await create_pool(url, app_role="agent_platform_app", size=2)
    try:
        yield pool
    finally:
        await pool.close()


def owner_execute(pgdata: Path, sql: str, *args: Any) -> None:
    """One statement as the owner, from synchronous code."""

    async def execute() -> None:
        async with owner(pgdata) as connection:
            await connection.execute(sql, *args)

    asyncio.run(execute())


class EmbeddedPostgres:
    """The embedded PostgreSQL alone on `data_dir`, migrated with `agent-platform migrate` when
    new: for the benchmarks that time SQL without serve."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.pgdata = data_dir / "pgdata"
        self.server: Any = None
        fresh = not (self.pgdata / "PG_VERSION").exists()
        self.start()
        if fresh:
            cmd, env = [executable("agent-platform"), "migrate"], {"AP_DATA_DIR": str(data_dir)}
            migrated = subprocess.run(
                cmd, env={**os.environ, **env}, capture_output=True, text=True, check=False
            )
            if migrated.returncode != 0:
                self.stop()
                raise BenchError(f"agent-platform migrate failed:\n{migrated.stderr[-2000:]}")

    def start(self) -> None:
        from adapters.postgres.embedded import start_embedded_postgres

        self.server, _ = start_embedded_postgres(self.data_dir)

    def stop(self) -> None:
        if self.server is not None:
            self.server.cleanup()
            self.server = None
        stop_leftover_postgres(self.pgdata)

    def __enter__(self) -> EmbeddedPostgres:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


# the machine and the code -----------------------------------------------------------------
def machine(wrk: bool = False) -> dict[str, str]:
    """CPUs, memory, kernel, Python, the load average now (and wrk's version)."""
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.MULTILINE)
    meminfo = re.search(r"^MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text(), re.MULTILINE)
    info = {
        "nproc": str(len(os.sched_getaffinity(0))),
        "cpu": model.group(1).strip() if model else platform_module.processor() or "unknown",
        "memory": f"{int(meminfo.group(1)) / 1024**2:.1f} GiB" if meminfo else "unknown",
        "kernel": platform_module.release(),
        "python": platform_module.python_version(),
        "load": load_average(),
    }
    if wrk:
        done = subprocess.run(["wrk", "-v"], capture_output=True, text=True, check=False)
        info["wrk"] = (done.stdout or done.stderr).splitlines()[0].split(" [")[0]
    return info


def machine_line(info: dict[str, str]) -> str:
    """The machine as a section's "Machine" line says it."""
    return (
        f"{info['nproc']} CPUs (nproc), {info['cpu']}, {info['memory']} RAM, "
        f"Linux {info['kernel']}, Python {info['python']}; load average at start {info['load']}"
    )


def load_average() -> str:
    """The 1, 5 and 15 minute load averages now."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def uptime() -> str:
    """What `uptime` prints now."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def git(*args: str) -> str:
    """What a git command prints in the repository (nothing when it fails)."""
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.rstrip()


def code_state() -> str:
    """HEAD and whether `src/` has uncommitted changes, for a section's "Code measured"."""
    dirty = git("status", "--porcelain", "--", "src")
    tree = "src/ as committed" if not dirty else f"src/ with uncommitted changes: {dirty!r}"
    return f"HEAD {git('rev-parse', '--short', 'HEAD')} ({tree})"


# process sampling -------------------------------------------------------------------------
def process_tree(pid: int) -> list[psutil.Process]:
    """A process and its descendants (none when it is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def tree_pss(pid: int) -> int:
    """PSS of a process and its children: each backend's share of PostgreSQL's shared buffers,
    so the sum is not inflated."""
    total = 0
    for proc in process_tree(pid):
        with suppress(psutil.Error):
            total += proc.memory_full_info().pss
    return total


async def sample_rss(process: psutil.Process, samples: int = 5, interval: float = 0.2) -> int:
    """The median of `samples` readings of the process's RSS (children excluded)."""
    values = []
    for _ in range(samples):
        values.append(process.memory_info().rss)
        await asyncio.sleep(interval)
    return int(statistics.median(values))


@dataclass
class Usage:
    """What a group of processes used while sampled: peak RSS and CPU seconds."""

    peak_rss: dict[int, int] = field(default_factory=dict)
    peak_total_rss: int = 0
    cpu_seconds: float = 0.0


class Sampler:
    """Samples named groups of processes (each a list of root pids, children included) every
    `interval` seconds in a thread: per-root peak RSS, the group's peak summed RSS, and CPU
    seconds used since sampling began (processes that exit between two samples lose at most
    one interval of CPU). Also the whole machine's busy CPU seconds, for the noise."""

    def __init__(self, groups: dict[str, list[int]], interval: float = 0.2) -> None:
        self.groups = groups
        self.interval = interval
        self.usage = {name: Usage() for name in groups}
        self._cpu_base: dict[int, float] = {}
        self._cpu_last: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._machine_start = psutil.cpu_times()
        self.machine_busy_seconds = 0.0
        self.seconds = 0.0
        self._started = 0.0

    def __enter__(self) -> Sampler:
        self._sample(first=True)
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        self.seconds = time.monotonic() - self._started
        end, begin = psutil.cpu_times(), self._machine_start
        idle = end.idle + getattr(end, "iowait", 0.0) - begin.idle - getattr(begin, "iowait", 0.0)
        self.machine_busy_seconds = sum(end) - sum(begin) - idle
        for name in self.groups:
            self.usage[name].cpu_seconds = sum(
                last - self._cpu_base.get(pid, 0.0)
                for pid, (group, last) in self._cpu_last.items()
                if group == name
            )

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self, first: bool = False) -> None:
        for name, roots in self.groups.items():
            usage = self.usage[name]
            total = 0
            for root in roots:
                rss = 0
                for proc in process_tree(root):
                    try:
                        with proc.oneshot():
                            rss += proc.memory_info().rss
                            times = proc.cpu_times()
                    except psutil.Error:
                        continue
                    cpu = times.user + times.system
                    if first:
                        self._cpu_base[proc.pid] = cpu
                    self._cpu_last[proc.pid] = (name, cpu)
                usage.peak_rss[root] = max(usage.peak_rss.get(root, 0), rss)
                total += rss
            usage.peak_total_rss = max(usage.peak_total_rss, total)


# statistics -------------------------------------------------------------------------------
def median(values: Iterable[float]) -> float:
    """The median, as a float."""
    return float(statistics.median(list(values)))


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def fmt(values: Iterable[float], digits: int = 2) -> str:
    """Figures (one per round, say) separated by commas."""
    return ", ".join(f"{v:.{digits}f}" for v in values)


def verdict(ok: bool) -> str:
    """A target's result as the sections write it."""
    return "PASS" if ok else "FAIL"


def alternate(items: Sequence[Any], i: int) -> Sequence[Any]:
    """`items` in order for even `i`, reversed for odd: who goes first alternates."""
    return items if i % 2 == 0 else items[::-1]


def rotate(items: Sequence[Any], i: int) -> list[Any]:
    """`items` starting at the `i`-th (modulo), so that each takes its turn first."""
    shift = i % len(items)
    return [*items[shift:], *items[:shift]]


@dataclass
class Rounds:
    """Measurements by key, one per round: medians over the rounds."""

    rounds: dict[Any, list[Any]] = field(default_factory=dict)

    def add(self, key: Any, measured: Any) -> None:
        self.rounds.setdefault(key, []).append(measured)

    def values(self, key: Any, attr: str) -> list[float]:
        return [getattr(m, attr) for m in self.rounds[key]]

    def median(self, key: Any, attr: str) -> float:
        return median(self.values(key, attr))


async def time_steps(
    steps: dict[str, Callable[[], Awaitable[Any]]],
    rounds: int,
    iterations: int,
    warmup: int,
    label: str,
    order: Callable[[int, int], Iterable[str]] | None = None,
) -> dict[str, list[float]]:
    """Each step `warmup` times, then per round `iterations` passes over the steps in
    `order(round, iteration)` (default: as given, reversed every other pass), each timed alone:
    the rounds' p50 (ms) per step."""
    order = order or (lambda r, i: alternate(list(steps), i + r))
    for _ in range(warmup):
        for fn in steps.values():
            await fn()
    rows: dict[str, list[float]] = {}
    for r in range(rounds):
        samples: dict[str, list[float]] = {name: [] for name in steps}
        for i in range(iterations):
            for name in order(r, i):
                t0 = time.perf_counter()
                await steps[name]()
                samples[name].append((time.perf_counter() - t0) * 1000)
        for name, values in samples.items():
            rows.setdefault(name, []).append(percentile(values, 50))
        progress = ", ".join(f"{n} {v[-1]:.3f} ms" for n, v in rows.items())
        print(f"round {r + 1} {label} p50: {progress}", flush=True)
    return rows


def cpu(fn: Callable[..., object], *args: Any) -> Callable[[], Awaitable[None]]:
    """A step of `time_steps` that is CPU work alone: `fn(*args)` called in a coroutine."""

    async def step() -> None:
        fn(*args)

    return step


# wrk --------------------------------------------------------------------------------------
@dataclass
class Measurement:
    """One wrk run's figures."""

    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: dict[str, int]

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def line(self) -> str:
        errors = f"  errors {self.errors}" if self.errors else ""
        return (
            f"{self.rps:8.1f} req/s  p50 {self.p50_ms:7.2f} ms  p99 {self.p99_ms:7.2f} ms{errors}"
        )


def wrk(
    url: str, token: str | None, threads: int, connections: int, duration: float
) -> Measurement:
    """One wrk run (`wrk_report.lua` adds the bearer token and prints the figures)."""
    load = [f"-t{threads}", f"-c{connections}", f"-d{duration:g}s", "--timeout", "10s"]
    cmd = ["wrk", *load, "-s", str(BENCH_DIR / "wrk_report.lua"), url]
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


def wrk_rounds(
    urls: dict[str, str],
    tokens: dict[str, str],
    loads: dict[str, tuple[int, int]],
    args: argparse.Namespace,
) -> Rounds:
    """Each target (in `urls`' order) at each load (threads, connections): an `args.warmup`
    run per target at the load named "loaded", then `args.rounds` rounds of `args.duration`
    runs, the targets' order rotating between rounds. Keyed (target, load)."""
    for target, url in urls.items():
        print(f"warm-up  {target} ({args.warmup:g}s)", flush=True)
        wrk(url, tokens[target], *loads["loaded"], args.warmup)
    results = Rounds()
    for r in range(args.rounds):
        for load, (threads, connections) in loads.items():
            for target in rotate(list(urls), r):
                m = wrk(urls[target], tokens[target], threads, connections, args.duration)
                results.add((target, load), m)
                print(f"round {r + 1}  {target:8} {load:8}  {m.line()}", flush=True)
    return results


def wrk_table(
    results: Rounds, labels: dict[str, str], loads: Iterable[str], per_round: bool = False
) -> list[str]:
    """`wrk_rounds`' medians, load by load: `| label | load | req/s | p50 | p99 |` (then the
    p50 of each round, with `per_round`)."""
    rows = []
    for load in loads:
        for target, label in labels.items():
            rps, p50, p99 = (results.median((target, load), x) for x in ("rps", "p50_ms", "p99_ms"))
            each = f" {fmt(results.values((target, load), 'p50_ms'))} |" if per_round else ""
            rows.append(f"| {label} | {load} | {rps:.0f} | {p50:.2f} | {p99:.2f} |{each}")
    return rows


# streamed chats ---------------------------------------------------------------------------
def chat_body(agent_id: int, text: str, title: str) -> dict[str, Any]:
    """A new conversation with a supplied title, so no title-generation job runs alongside."""
    return {
        "agentId": agent_id,
        "title": title,
        "messages": [{"role": "user", "parts": [{"type": "text", "text": text}]}],
    }


@dataclass
class StreamResult:
    """One streamed answer as `read_stream` read it (perf_counter times)."""

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

    def problem(self, expected: str) -> str | None:
        """What is wrong with this answer, when its text should be `expected`."""
        if not self.ok:
            return "; ".join(self.errors) or f"status {self.status}"
        if "".join(self.text) != expected:
            return "the assembled text differs from the scripted answer"
        return None


def openai_delta(event: dict[str, Any]) -> str | None:
    """The text of an OpenAI chat-completion chunk (the provider called directly)."""
    choices = event.get("choices") or []
    if choices:
        content = (choices[0].get("delta") or {}).get("content")
        if content:
            return str(content)
    return None


def ui_delta(event: dict[str, Any]) -> str | None:
    """The text of an AI SDK UI message stream event (`POST /chat`); an error event raises."""
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
    `json.loads`, whichever side sends it."""
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


def chat_client(connections: int = 10, timeout: float = 120.0) -> httpx.AsyncClient:
    """An httpx client keeping up to `connections` connections alive."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return httpx.AsyncClient(limits=limits, timeout=timeout)


async def arrivals(client: httpx.AsyncClient, provider_url: str) -> list[float]:
    """When the scripted provider read each completion request (its wall clock), sorted."""
    return sorted((await client.get(f"{provider_url}/arrivals")).json())


def provider_ms(item: StreamResult, arrived: list[float]) -> float | None:
    """When the provider had read the platform's request, ms from sending ours (the one arrival
    inside this sequential request; wall clocks of the same machine)."""
    if item.done is None:
        return None
    end = item.wall_started + (item.done - item.started)
    inside = [a for a in arrived if item.wall_started <= a <= end]
    if len(inside) != 1:
        return None
    return (inside[0] - item.wall_started) * 1000


Pair = dict[str, StreamResult | None]


async def paired_rounds(
    configs: Sequence[str],
    rounds: int,
    requests: int,
    one: Callable[[str], Awaitable[StreamResult]],
    problem: Callable[[StreamResult, str], str | None],
    errors: dict[str, int],
) -> AsyncIterator[tuple[int, dict[str, list[StreamResult]], list[Pair]]]:
    """The paired rounds: per round `requests` requests per configuration, one by one, the
    configurations alternating (which goes first alternates too). Yields per round its index,
    the answers without a problem per configuration and the pairs (None for a failed one);
    each failure is counted in `errors` and printed."""
    for r in range(rounds):
        got: dict[str, list[StreamResult]] = {c: [] for c in configs}
        pairs: list[Pair] = []
        for i in range(requests):
            pair: Pair = {}
            for config in alternate(configs, i + r):
                result = await one(config)
                trouble = problem(result, config)
                pair[config] = None if trouble else result
                if trouble is None:
                    got[config].append(result)
                else:
                    errors[config] += 1
                    print(f"  {config} error: {trouble}", flush=True)
            pairs.append(pair)
        yield r, got, pairs


@dataclass
class ChatRound:
    """One configuration's figures in one round of `PairedChat` (ms)."""

    first_p50: float
    first_p99: float
    provider_p50: float
    headers_p50: float
    last_p50: float


ROUND_FIGURES = ("first_p50", "first_p99", "provider_p50", "headers_p50", "last_p50")


@dataclass
class PairedChat:
    """Chat time to first byte with two configurations (two agents, or two organizations) on
    the scripted provider, in paired rounds; per round and configuration the p50/p99 of the
    first `text-delta`, and p50 of when the provider had read the platform's request, of the
    response's headers and of `[DONE]`; per round the median of the pairs' differences."""

    platform: Platform
    provider_url: str
    agents: dict[str, int]  # per configuration, in order: the agent chatted with
    tokens: dict[str, str]  # per configuration: the bearer token
    expected: str  # the scripted answer's text
    prompt: str
    title: str
    titles: int = 0
    paired: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.configs = tuple(self.agents)
        self.rounds: dict[str, list[ChatRound]] = {c: [] for c in self.configs}
        self.errors = dict.fromkeys(self.configs, 0)
        self.chats = dict.fromkeys(self.configs, 0)

    async def one(self, client: httpx.AsyncClient, config: str) -> StreamResult:
        self.titles += 1
        self.chats[config] += 1
        body = chat_body(self.agents[config], self.prompt, f"{self.title} {self.titles}")
        url, headers = f"{self.platform.url}/chat", bearer(self.tokens[config])
        return await read_stream(client, url, body, headers, ui_delta)

    async def run(self, client: httpx.AsyncClient, warmup: int, rounds: int, requests: int) -> None:
        """One checked chat per configuration, `warmup` unrecorded pairs, the rounds."""
        for config in self.configs:
            trouble = (await self.one(client, config)).problem(self.expected)
            if trouble:
                raise BenchError(f"{config}: {trouble}")
        print(f"chat warm-up: {warmup} per configuration", flush=True)
        for _ in range(warmup):
            for config in self.configs:
                await self.one(client, config)

        def problem(result: StreamResult, _: str) -> str | None:
            return result.problem(self.expected)

        a, b = self.configs
        one = functools.partial(self.one, client)
        async for r, got, pairs in paired_rounds(
            self.configs, rounds, requests, one, problem, self.errors
        ):
            arrived = await arrivals(client, self.provider_url)
            for config in self.configs:
                items = got[config]
                if not items:
                    raise BenchError(f"no successful chat ({config}) in round {r + 1}")
                provider = [p for p in (provider_ms(x, arrived) for x in items) if p]
                self.rounds[config].append(
                    ChatRound(
                        first_p50=percentile([x.first_ms for x in items], 50),
                        first_p99=percentile([x.first_ms for x in items], 99),
                        provider_p50=percentile(provider, 50) if provider else float("nan"),
                        headers_p50=percentile(
                            [(x.marks["headers"] - x.started) * 1000 for x in items], 50
                        ),
                        last_p50=percentile([x.last_ms for x in items], 50),
                    )
                )
            diffs = [x.first_ms - y.first_ms for p in pairs if (x := p[a]) and (y := p[b])]
            self.paired.append(statistics.median(diffs))
            x, y = self.rounds[a][-1], self.rounds[b][-1]
            print(
                f"round {r + 1} chat  first p50 {a} {x.first_p50:.2f} ms, {b} {y.first_p50:.2f}"
                f" ms: {x.first_p50 - y.first_p50:+.2f} ms (paired median {self.paired[-1]:+.2f})"
                f"; provider read p50 {x.provider_p50:.2f} / {y.provider_p50:.2f} ms",
                flush=True,
            )

    def added(self, attr: str) -> float:
        """Median over rounds of (first configuration - second), ms."""
        a, b = self.configs
        pairs = zip(self.rounds[a], self.rounds[b], strict=True)
        return median(getattr(x, attr) - getattr(y, attr) for x, y in pairs)

    def med(self, config: str, attr: str) -> float:
        return median(getattr(x, attr) for x in self.rounds[config])

    def table(self, first: str, labels: dict[str, str], added: str) -> list[str]:
        """The table, its first column headed `first`: a row per configuration (in `labels`'
        order) and the added row: first p50 and p99, provider read, headers and `[DONE]` p50
        (ms)."""
        head = (
            f"| {first} | first p50 (ms) | first p99 (ms) | provider read p50 (ms) | headers p50 "
            "(ms) | `[DONE]` p50 (ms) |"
        )
        rows = [
            f"| {label} | " + " | ".join(f"{self.med(c, x):.2f}" for x in ROUND_FIGURES) + " |"
            for c, label in labels.items()
        ]
        more = " | ".join(f"{self.added(x):.2f}" for x in ROUND_FIGURES[2:])
        added_row = f"| {added} | {self.added('first_p50'):.2f} | | {more} |"
        return [head, "|---|---:|---:|---:|---:|---:|", *rows, added_row]

    def per_round(self, first: str, second: str) -> str:
        """The first p50 per round of each configuration (labelled `first` and `second`), their
        differences, the paired medians and the errors."""
        a, b = self.configs
        x, y = self.rounds[a], self.rounds[b]
        return (
            f"first p50 {first} {fmt(v.first_p50 for v in x)}; {second} "
            f"{fmt(v.first_p50 for v in y)}; added "
            f"{fmt(v.first_p50 - w.first_p50 for v, w in zip(x, y, strict=True))}; paired "
            f"median {fmt(self.paired)}. Errors: {a} {self.errors[a]}, {b} {self.errors[b]}."
        )


# the report -------------------------------------------------------------------------------
def command_line(script: str) -> str:
    """How the benchmark was started (where the section was written to left out)."""
    args, rest = [], iter(sys.argv[1:])
    for arg in rest:
        if arg == "--benchmarks-file":
            next(rest, None)
        elif not arg.startswith("--benchmarks-file="):
            args.append(arg)
    command = shlex.join([os.path.relpath(sys.executable, ROOT), f"bench/{script}"])
    return command + "".join(f" {shlex.quote(a)}" for a in args)


def heading(title: str, script: str, when: datetime | None = None, command: str = "") -> list[str]:
    """A section's title and its "Measured ... with ..." line."""
    when = when or datetime.now(UTC)
    return [
        f"## {title}",
        "",
        f"Measured {when:%Y-%m-%d %H:%M} UTC with `{command or command_line(script)}` (from the "
        "repository root).",
        "",
    ]


def write_section(path: Path, title: str, text: str) -> None:
    """Replace the `## title` section (up to the next `## `) or append it; the file is read
    right before writing, so other benchmarks' sections written meanwhile are kept."""
    current = path.read_text() if path.exists() else ""
    if not current.strip():
        current = (
            "# Benchmarks\n\nOne section per benchmark; re-running a benchmark rewrites only "
            "its own section.\n"
        )
    lines = current.splitlines(keepends=True)
    start = next((i for i, x in enumerate(lines) if x.rstrip() == f"## {title}"), None)
    if start is None:
        path.write_text(current.rstrip("\n") + "\n\n" + text)
        return
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    rest = "".join(lines[end:])
    path.write_text("".join(lines[:start]) + text + ("\n" + rest if rest else ""))


# Options several benchmarks take, each with its own default (`parser(doc, rounds=3)`): their help.
COMMON_OPTIONS = {
    "rounds": "rounds, each measuring every side",
    "warmup": "warm-up: seconds per wrk target, or unrecorded runs per side",
    "duration": "seconds per wrk run",
    "requests": "requests per side per round",
    "seed": "seed of the generated data",
}


def parser(
    doc: str | None, *, serve: bool = False, provider: bool = False, **common: float
) -> argparse.ArgumentParser:
    """A benchmark's argument parser, with the options every benchmark takes; with `serve`,
    `--log-level` (serve's `AP_LOG_LEVEL`); with `provider`, that and `--tokens` (the scripted
    provider's content deltas per answer); `common`: those of `COMMON_OPTIONS` it takes, with
    their defaults (the type is the default's)."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    for name, default in common.items():
        parser.add_argument(
            f"--{name}", type=type(default), default=default, help=COMMON_OPTIONS[name]
        )
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    where = "the file whose section is rewritten (default: BENCHMARKS.md at the repository root)"
    parser.add_argument("--benchmarks-file", type=Path, default=BENCHMARKS_FILE, help=where)
    if serve or provider:
        levels = ("debug", "info", "warning", "error")
        parser.add_argument("--log-level", default="info", choices=levels, help="AP_LOG_LEVEL")
    if provider:
        parser.add_argument("--tokens", type=int, default=200, help="content deltas per answer")
    return parser


# A benchmark's measuring: `measure(args, machine)`, the section's text and whether every target
# is met.
Measure = Callable[[argparse.Namespace, dict[str, str]], tuple[str, bool]]


def run(title: str, args: argparse.Namespace, measure: Measure, *, wrk: bool = False) -> int:
    """A benchmark from the machine's description to its section: `measure(args, machine)`
    returns the section's text and whether every target is met. Prints the section and, unless
    `--no-write`, puts it into the benchmarks file. The exit status: 0 when every target is
    met, 1 when one is missed, 2 when the benchmark could not run."""
    if wrk and shutil.which("wrk") is None:
        print(
            "wrk is not installed. On Debian/Ubuntu: sudo apt-get update && "
            "sudo apt-get install -y wrk (or build it from https://github.com/wg/wrk).",
            file=sys.stderr,
        )
        return 2
    try:
        text, ok = measure(args, machine(wrk=wrk))
    except BenchError as error:
        print(f"benchmark failed: {error}", file=sys.stderr)
        return 2
    print()
    print(text)
    if not args.no_write:
        write_section(args.benchmarks_file, title, text)
        print(f"written to {args.benchmarks_file}")
    return 0 if ok else 1
