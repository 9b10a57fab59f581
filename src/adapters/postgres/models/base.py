"""The models' declarative base and the column shapes they share.

The models have a `MetaData` of their own (not advanced-alchemy's shared registry) whose naming
convention names primary keys, foreign keys and unique constraints as PostgreSQL does when a
migration leaves them unnamed (`chunks_pkey`, `chunks_file_record_id_fkey`): the names the
migrated schema has. Alembic names what a migration's `op` calls leave unnamed by it too, so
changing it renames nothing that exists but changes what the old migrations create on a new
database. Names PostgreSQL would truncate (past 63 bytes) are not reproduced: name such a
constraint in the model and in its migration.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from advanced_alchemy.base import CommonTableAttributes
from advanced_alchemy.types import DateTimeUTC
from sqlalchemy import MetaData, String, func
from sqlalchemy.ext.asyncio import AsyncAttrs
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "pk": "%(table_name)s_pkey",
    "fk": "%(table_name)s_%(column_0_N_name)s_fkey",
    "uq": "%(table_name)s_%(column_0_N_name)s_key",
}
"""PostgreSQL's own names for unnamed constraints; check constraints are always named."""

metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Base(CommonTableAttributes, AsyncAttrs, DeclarativeBase):
    metadata = metadata


def org_column() -> Any:
    """The organization a row belongs to: what row-level security filters on."""
    return mapped_column(String(128))


def now() -> Any:
    """A timestamp the database sets to the transaction's time when the row is inserted."""
    return mapped_column(DateTimeUTC(timezone=True), server_default=func.now())


class Timestamps:
    created_at: Mapped[dt.datetime] = now()
    updated_at: Mapped[dt.datetime] = now()
