"""The embedded PostgreSQL after an owner dies uncleanly: the next start adopts the server left
running (or starts afresh over a dead one's leftovers), and the last live owner's clean exit
stops it, so no server is left behind."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import psutil
import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# Starts the server, prints its URL, and exits cleanly once its stdin is closed.
OWNER = """
import sys
from pathlib import Path

from adapters.postgres.embedded import start_embedded_postgres

_, url = start_embedded_postgres(Path(sys.argv[1]))
print(url, flush=True)
sys.stdin.read()
"""


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """A fresh data dir; any server still serving it at the end is killed, so a failing test
    leaves nothing running either."""
    yield tmp_path
    for process in _servers_of(tmp_path):
        process.kill()


@dataclass
class Owner:
    """A child process that started the server, and the URL it printed."""

    process: subprocess.Popen[str]
    url: str


@pytest.fixture
def owners() -> Iterator[list[Owner]]:
    """The owners a test started; those still running at the end are killed."""
    started: list[Owner] = []
    yield started
    for owner in started:
        if owner.process.poll() is None:
            owner.process.kill()
            owner.process.wait(10)


def test_the_next_start_adopts_a_server_whose_owner_was_killed(data_dir, owners):
    killed = _start_owner(data_dir, owners)
    postmaster = _postmaster_pid(data_dir)
    _kill(killed)
    assert _alive(postmaster), "the server outlives its killed owner"
    assert _listed_owners(data_dir) == [killed.process.pid]

    owner = _start_owner(data_dir, owners)

    assert _postmaster_pid(data_dir) == postmaster
    assert _select_one(owner.url) == 1
    assert _listed_owners(data_dir) == [owner.process.pid]
    _exit_cleanly(owner)
    assert not _alive(postmaster)
    assert _servers_of(data_dir) == []


def test_two_live_owners_still_share_an_adopted_server(data_dir, owners):
    _kill(_start_owner(data_dir, owners))

    first = _start_owner(data_dir, owners)
    second = _start_owner(data_dir, owners)

    assert _listed_owners(data_dir) == [first.process.pid, second.process.pid]
    postmaster = _postmaster_pid(data_dir)
    _exit_cleanly(first)
    assert _select_one(second.url) == 1
    assert _listed_owners(data_dir) == [second.process.pid]
    _exit_cleanly(second)
    assert not _alive(postmaster)
    assert _servers_of(data_dir) == []


def test_a_dead_servers_postmaster_pid_does_not_block_the_start(data_dir, owners):
    killed = _start_owner(data_dir, owners)
    postmaster = psutil.Process(_postmaster_pid(data_dir))
    server = [postmaster, *postmaster.children(recursive=True)]
    _kill(killed)
    for process in server:
        # A backend may notice its postmaster's death and exit before its own kill.
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(server, timeout=10)
    # Its pid now names a live process that is no postgres, as after a reboot.
    lock_file = data_dir / "pgdata" / "postmaster.pid"
    lines = lock_file.read_text().split("\n")
    lock_file.write_text("\n".join([str(os.getpid()), *lines[1:]]))

    owner = _start_owner(data_dir, owners)

    assert _select_one(owner.url) == 1
    assert _listed_owners(data_dir) == [owner.process.pid]
    restarted = _postmaster_pid(data_dir)
    _exit_cleanly(owner)
    assert not _alive(restarted)
    assert _servers_of(data_dir) == []


def _start_owner(data_dir: Path, owners: list[Owner]) -> Owner:
    paths = [str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])]
    process = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(data_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
    )
    assert process.stdout is not None
    owner = Owner(process, process.stdout.readline().strip())
    owners.append(owner)
    assert owner.url.startswith("postgresql+asyncpg://"), f"owner exited: {process.wait(10)}"
    return owner


def _kill(owner: Owner) -> None:
    owner.process.send_signal(signal.SIGKILL)
    owner.process.wait(10)


def _exit_cleanly(owner: Owner) -> None:
    assert owner.process.stdin is not None
    owner.process.stdin.close()
    assert owner.process.wait(20) == 0


def _alive(pid: int) -> bool:
    """Whether `pid` runs; a zombie (dead, not yet reaped by its parent) does not."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "pgdata" / "postmaster.pid").read_text().split("\n", 1)[0])


def _listed_owners(data_dir: Path) -> list[int]:
    return list(json.loads((data_dir / "pgdata" / ".handle_pids.json").read_text()))


def _servers_of(data_dir: Path) -> list[psutil.Process]:
    """The running postgres processes whose command line names the data dir's `pgdata`."""
    pgdata = str(data_dir / "pgdata")
    return [
        process
        for process in psutil.process_iter(["name", "cmdline"])
        if process.info["name"] == "postgres" and pgdata in (process.info["cmdline"] or [])
    ]


def _select_one(url: str) -> int:
    async def select_one() -> int:
        connection = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            return int(await connection.fetchval("SELECT 1"))
        finally:
            await connection.close()

    # A thread of its own, so asyncio.run leaves the test session's event loop alone.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, select_one()).result(timeout=20)
