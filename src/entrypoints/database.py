"""Where the database is: the configured URL, or the embedded server under the data dir."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adapters.postgres.embedded import start_embedded_postgres
from entrypoints.config import Settings


@dataclass(frozen=True, slots=True)
class Database:
    """The owner's URL (for migrations) and, when embedded, the server handle to keep alive."""

    url: str
    server: Any = None


def resolve_database(settings: Settings) -> Database:
    if settings.database_url:
        return Database(settings.database_url)
    server, url = start_embedded_postgres(settings.data_dir.resolve())
    return Database(url, server)
