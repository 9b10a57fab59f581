"""Operations: the readiness probes and cross-organization counts behind `/health/ready` and
`/metrics`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
from dishka import Provider, Scope, provide

from adapters.postgres.database import create_pool
from adapters.postgres.operations import OPERATIONS_POOL_SIZE, PgOperations
from entrypoints.config import Settings
from entrypoints.database import Database


class OperationsProvider(Provider):
    """`PgOperations` on a pool of its own (made at the first probe), for the app's life."""

    scope = Scope.APP

    @provide
    async def operations(
        self, settings: Settings, database: Database
    ) -> AsyncIterator[PgOperations]:
        async def connect() -> asyncpg.Pool:
            return await create_pool(
                database.url, app_role=settings.database_app_role, size=OPERATIONS_POOL_SIZE
            )

        operations = PgOperations(connect, cache_seconds=settings.metrics_cache_seconds)
        yield operations
        await operations.close()
