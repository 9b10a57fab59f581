"""Long-lived clients (database pool, HTTP client, storage, clock) and the request's
organization-scoped connection."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import httpx
from dishka import Provider, Scope, alias, from_context, provide

from adapters.clock import SystemClock
from adapters.postgres.database import FairGate, OrgConnection, create_pool, org_connection
from adapters.storage.local_disk import LocalDiskStorage, load_or_create_secret
from adapters.storage.s3 import S3ObjectStorage, s3_client
from application.ports.clock import Clock
from application.ports.object_storage import ObjectStorage
from application.ports.unit_of_work import UnitOfWork
from domain.identity import Identity
from entrypoints.config import Settings
from entrypoints.database import Database


class InfrastructureProvider(Provider):
    """The pool and its fair gate, the shared HTTP client, object storage and the clock for
    the app's life; per request, one connection acting in the caller's organization."""

    scope = Scope.APP
    settings = from_context(Settings)
    database = from_context(Database)
    clock = provide(SystemClock, provides=Clock)

    @provide
    async def pool(self, settings: Settings, database: Database) -> AsyncIterator[asyncpg.Pool]:
        pool = await create_pool(
            database.url, app_role=settings.database_app_role, size=settings.database_pool_size
        )
        yield pool
        await pool.close()

    @provide
    def gate(self, settings: Settings) -> FairGate:
        return FairGate(settings.database_pool_size)

    @provide
    async def http_client(self) -> AsyncIterator[httpx.AsyncClient]:
        async with httpx.AsyncClient(follow_redirects=False) as client:
            yield client

    @provide
    def local_storage(self, settings: Settings) -> LocalDiskStorage:
        return local_disk_storage(settings)

    @provide
    async def storage(self, settings: Settings) -> AsyncIterator[ObjectStorage]:
        if settings.storage != "s3":
            yield local_disk_storage(settings)
            return
        assert settings.s3_bucket
        async with s3_client(
            endpoint_url=settings.s3_endpoint_url,
            region=settings.s3_region,
            path_style=settings.s3_path_style,
        ) as client:
            yield S3ObjectStorage(client, settings.s3_bucket, settings.s3_prefix)

    @provide(scope=Scope.REQUEST)
    async def connection(
        self, pool: asyncpg.Pool, gate: FairGate, identity: Identity
    ) -> AsyncIterator[OrgConnection]:
        # A member's own token: the connection also learns when they were last removed.
        member = identity.user_id if identity.issued_at is not None else None
        async with org_connection(pool, identity.org_id, gate, member=member) as connection:
            yield connection

    unit_of_work = alias(source=OrgConnection, provides=UnitOfWork)


def local_disk_storage(settings: Settings) -> LocalDiskStorage:
    data_dir = settings.data_dir.resolve()
    return LocalDiskStorage(
        data_dir / "objects",
        settings.effective_public_url,
        load_or_create_secret(data_dir / "storage-signing.key"),
    )
