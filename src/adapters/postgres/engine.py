"""The engine and the organization-scoped session.

The application never runs as the tables' owner: every pooled connection switches to the
app role (no BYPASSRLS, owns nothing) as soon as it opens, and every transaction a session
begins first sets `app.org_id`, which the row-level security policies compare against.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import Session, SessionTransaction

DEFAULT_APP_ROLE = "agent_platform_app"
_ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
ORG_KEY = "org_id"


class OrgScopedSession(Session):
    """A session whose every transaction is scoped to `session.info["org_id"]`."""


@event.listens_for(OrgScopedSession, "after_begin")
def _scope_transaction(session: Session, _tx: SessionTransaction, connection: Connection) -> None:
    connection.execute(
        text("SELECT set_config('app.org_id', :org, true)"),
        {"org": session.info.get(ORG_KEY) or ""},
    )


def to_async_url(url: str) -> str:
    """Accept `postgres://` and `postgresql://` URLs and select the asyncpg driver."""
    for prefix in ("postgres://", "postgresql://", "postgresql+psycopg://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    return url


def create_engine(
    url: str,
    *,
    app_role: str | None = DEFAULT_APP_ROLE,
    pool_size: int = 10,
    max_overflow: int = 10,
    **kwargs: Any,
) -> AsyncEngine:
    """An engine whose connections act as `app_role`; None keeps the login role (migrations)."""
    engine = create_async_engine(
        to_async_url(url), pool_size=pool_size, max_overflow=max_overflow, **kwargs
    )
    if app_role is not None:
        if not _ROLE_NAME.match(app_role):
            raise ValueError(f"invalid database role name: {app_role!r}")

        @event.listens_for(engine.sync_engine, "connect")
        def _act_as_app_role(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.run_async(lambda conn: conn.execute(f'SET ROLE "{app_role}"'))

    return engine


def create_session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False, sync_session_class=OrgScopedSession)


@asynccontextmanager
async def org_session(
    factory: async_sessionmaker[AsyncSession], org_id: str | None
) -> AsyncIterator[AsyncSession]:
    """A session scoped to `org_id`; whatever it did not commit is rolled back on exit."""
    async with factory() as session:
        session.info[ORG_KEY] = org_id
        try:
            yield session
        finally:
            await session.rollback()


class SqlaUnitOfWork:
    """`UnitOfWork` over one organization-scoped SQLAlchemy session."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def commit(self) -> None:
        await self._session.commit()

    async def rollback(self) -> None:
        await self._session.rollback()
