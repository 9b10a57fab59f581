"""Helpers shared by `ingestion.py` and `search.py`: the machine description, the owner's
connection to the embedded PostgreSQL, process sampling (RSS, CPU) and the BENCHMARKS.md
section writer. Process start/stop and readiness come from `kb_endpoints.py`."""

from __future__ import annotations

import os
import platform
import re
import shlex
import statistics
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import psutil
from kb_endpoints import ROOT

DATABASE = "agent_platform"


def machine() -> dict[str, str]:
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.MULTILINE)
    meminfo = re.search(r"^MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text(), re.MULTILINE)
    return {
        "nproc": str(len(os.sched_getaffinity(0))),
        "cpu": model.group(1).strip() if model else platform.processor() or "unknown",
        "memory": f"{int(meminfo.group(1)) / 1024**2:.1f} GiB" if meminfo else "unknown",
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def machine_line(info: dict[str, str]) -> str:
    return (
        f"{info['nproc']} CPUs (nproc), {info['cpu']}, {info['memory']} RAM, "
        f"Linux {info['kernel']}, Python {info['python']}; load average at start {info['load']}"
    )


def command_line(script: str) -> str:
    command = shlex.join([os.path.relpath(sys.executable, ROOT), f"bench/{script}"])
    return command + "".join(f" {shlex.quote(a)}" for a in sys.argv[1:])


def postmaster(pgdata: Path) -> tuple[int, Path]:
    """The embedded server's pid and Unix socket directory (from `postmaster.pid`)."""
    lines = (pgdata / "postmaster.pid").read_text().splitlines()
    return int(lines[0]), Path(lines[4].strip() or pgdata)


async def owner_connection(pgdata: Path) -> asyncpg.Connection:
    """The superuser (schema owner) over the embedded server's socket: bypasses RLS."""
    _, socket_dir = postmaster(pgdata)
    connection: asyncpg.Connection = await asyncpg.connect(
        host=str(socket_dir), user="postgres", database=DATABASE
    )
    return connection


def owner_url(pgdata: Path) -> str:
    _, socket_dir = postmaster(pgdata)
    return f"postgresql://postgres@/{DATABASE}?host={socket_dir}"


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


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
        end = psutil.cpu_times()
        idle = (end.idle + getattr(end, "iowait", 0.0)) - (
            self._machine_start.idle + getattr(self._machine_start, "iowait", 0.0)
        )
        total = sum(end) - sum(self._machine_start)
        self.machine_busy_seconds = total - idle
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
                for proc in _tree(root):
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


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []
