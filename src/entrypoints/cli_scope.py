"""What the CLI's commands on an organization share: the database migrated, then one scope of
the app's container acting as an admin of `--org` (as `--user`)."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from dishka import AsyncContainer

from adapters.postgres.migrations import migrate
from domain.identity import ADMIN_ROLE, Caller, Identity
from entrypoints.config import Settings
from entrypoints.database import Database
from entrypoints.wiring import make_container


@asynccontextmanager
async def admin_scope(
    settings: Settings, database: Database, args: argparse.Namespace
) -> AsyncIterator[tuple[AsyncContainer, Caller]]:
    """A request scope of a new container and its caller, an admin of `args.org` acting as
    `args.user`; the container is closed when the block ends, however it ends."""
    await migrate(database.owner_url)
    container = make_container(settings, database)
    identity = Identity(user_id=args.user, org_id=args.org, role=ADMIN_ROLE)
    try:
        async with container(context={Identity: identity}) as scope:
            yield scope, identity.as_caller()
    finally:
        await container.close()
