"""The SQLAlchemy engine, used by Alembic and by tests that arrange data as the owner."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


def to_async_url(url: str) -> str:
    """Accept `postgres://` and `postgresql://` URLs and select the asyncpg driver."""
    for prefix in ("postgres://", "postgresql://", "postgresql+psycopg://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    return url


def create_engine(url: str, *, pool_size: int = 2, **kwargs: Any) -> AsyncEngine:
    """An engine connecting as the URL's login role (the schema owner for migrations)."""
    return create_async_engine(to_async_url(url), pool_size=pool_size, max_overflow=0, **kwargs)
