"""Where the database is: the configured URL, or the embedded server under the data dir."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adapters.postgres.embedded import start_embedded_postgres
from entrypoints.config import Settings


@dataclass(frozen=True, slots=True)
class Database:
    """The app's URL, the schema owner's URL for migrations (the same unless configured) and,
    when embedded, the server handle to keep alive."""

    url: str
    server: Any = None
    migration_url: str | None = None

    @property
    def owner_url(self) -> str:
        return self.migration_url or self.url


def resolve_database(settings: Settings) -> Database:
    if settings.database_url:
        return Database(settings.database_url, migration_url=settings.database_migration_url)
    server, url = start_embedded_postgres(settings.data_dir.resolve())
    return Database(url, server)
