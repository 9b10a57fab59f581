"""Alembic environment: runs migrations online over asyncpg as the schema owner."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from adapters.postgres.engine import create_engine


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=None, transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()


async def _main() -> None:
    url = context.config.attributes.get("url") or context.config.get_main_option("sqlalchemy.url")
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run `agent-platform migrate`")
asyncio.run(_main())
