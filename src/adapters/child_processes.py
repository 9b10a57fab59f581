"""What the supervisors of child processes (the local-model runner, the embedded worker)
share: the pause before a restart, and how an exit is told in the logs."""

from __future__ import annotations

import os
import signal


class Backoff:
    """Pauses before restarting a child that keeps failing: `initial`, doubling up to
    `maximum`; `reset` once a child has run long enough to count as healthy."""

    def __init__(self, initial: float = 0.5, maximum: float = 30.0) -> None:
        self._initial = initial
        self._maximum = maximum
        self._next = initial

    def next(self) -> float:
        delay = self._next
        self._next = min(self._next * 2, self._maximum)
        return delay

    def reset(self) -> None:
        self._next = self._initial


def describe_exit(returncode: int | None) -> str:
    """`exit code 3`, `signal SIGSEGV`, or `running`, from a `returncode` as asyncio and
    subprocess report it (negative for a signal)."""
    if returncode is None:
        return "running"
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


def resident_bytes(pid: int) -> int | None:
    """A process's resident memory, from /proc (None where that is not available)."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def cpu_seconds(pid: int) -> float | None:
    """CPU time a process has used (user + system, all threads), from /proc (None where that
    is not available)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # Fields after the command name, which may itself hold spaces and parentheses.
            fields = stat.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
