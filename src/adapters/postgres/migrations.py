"""Runs the Alembic migrations in `migrations/` against a database URL.

Every `serve` migrates as it starts, so several processes (replicas rolled out together, a
`migrate` job beside them) may migrate one database at once. Each holds a Postgres advisory lock
while it migrates: the others wait for it, then find the schema at head and do nothing, instead
of racing to create the same tables and failing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import structlog
from alembic import command
from alembic.config import Config

from adapters.postgres.database import asyncpg_dsn

_IN_REPOSITORY = Path(__file__).resolve().parents[3] / "migrations"
# Where a built wheel would carry them (pyproject.toml's wheel target must force-include
# `migrations` there): a non-editable install has no repository around it.
_PACKAGED = Path(__file__).resolve().parent / "alembic"
MIGRATIONS_DIR = _IN_REPOSITORY if _IN_REPOSITORY.is_dir() else _PACKAGED
log = structlog.get_logger("agent_platform.migrations")
MIGRATION_LOCK = 7_317_982_430_671_234_529
"""The advisory lock key (any bigint; one per database) held while a process migrates."""


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["url"] = url
    return config


def _run(url: str, action: str, revision: str) -> None:
    config = alembic_config(url)
    if action == "upgrade":
        command.upgrade(config, revision)
    else:
        command.downgrade(config, revision)


async def _locked(url: str, action: str, revision: str) -> None:
    """`action` off the event loop (Alembic drives its own loop), one process at a time."""
    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        # A session lock on a connection of its own: it outlives Alembic's transactions, and
        # goes with the connection if this process dies.
        if not await connection.fetchval("SELECT pg_try_advisory_lock($1)", MIGRATION_LOCK):
            log.info("migrations.waiting", reason="another process is migrating this database")
            await connection.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK)
        await asyncio.to_thread(_run, url, action, revision)
    finally:
        await connection.close()


async def migrate(url: str, revision: str = "head") -> None:
    """Upgrade the schema to `revision`."""
    await _locked(url, "upgrade", revision)


async def downgrade(url: str, revision: str = "base") -> None:
    await _locked(url, "downgrade", revision)
