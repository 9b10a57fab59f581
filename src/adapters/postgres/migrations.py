"""Runs the Alembic migrations in `migrations/` against a database URL."""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parents[3] / "migrations"


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


async def migrate(url: str, revision: str = "head") -> None:
    """Upgrade the schema to `revision`, off the event loop (Alembic drives its own loop)."""
    await asyncio.to_thread(_run, url, "upgrade", revision)


async def downgrade(url: str, revision: str = "base") -> None:
    await asyncio.to_thread(_run, url, "downgrade", revision)
