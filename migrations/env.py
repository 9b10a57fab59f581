"""Alembic environment: runs migrations online over asyncpg as the schema owner.

The models (`adapters.postgres.models`) are the schema's declaration and Alembic's target
metadata: `alembic revision --autogenerate` writes the migration that brings a database at head
to them, and `alembic check` fails while the two differ (tests/integration/test_schema_models.py
runs it). Compared: tables, columns, types (`compare_type`), nullability, server defaults
(`compare_server_default`), indexes, unique and foreign-key constraints. The metadata's naming
convention also names what a migration's `op` calls leave unnamed; it is PostgreSQL's own, so
migrations 0001-0005 create the very names they created before the models fed them.

Left out of the comparison, because no model declares them:
- pgqueuer's tables (installed by its own script in migration 0001, named by its settings);
  its enum type, function and trigger are not seen by autogenerate anyway;
- the per-dimension HNSW indexes on `chunks` (`ix_chunks_embedding_<dims>`), which
  `ap_ensure_chunk_index` creates when a knowledge base first uses a dimension count.
Autogenerate does not see row-level security, policies, grants, SQL functions, triggers,
extensions, roles or check constraints: a migration writes those by hand (see `_secure` in 0003
for a new tenant table); test_schema_models.py compares the check constraints itself.

The database is `config.attributes["url"]` (what `agent-platform migrate` and the tests pass),
else the `sqlalchemy.url` option, else the one the service would migrate:
`AP_DATABASE_MIGRATION_URL`, `AP_DATABASE_URL`, or the embedded server under `AP_DATA_DIR`.

Adding a migration (the README's "Adding a migration" says more):
    agent-platform migrate        # the database compared with must be at head
    # change the models, then, from the repository's root (pyproject.toml's [tool.alembic]
    # names this folder):
    alembic revision --autogenerate --rev-id 0006 -m "what it does"
An autogenerate that finds no difference writes no file.
"""

from __future__ import annotations

import asyncio
import copy
import re
from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext
from alembic.autogenerate.render import _repr_type
from alembic.runtime.environment import NameFilterParentNames, NameFilterType
from alembic.runtime.migration import MigrationContext
from pgqueuer.adapters.persistence.qb import QueryBuilderEnvironment
from sqlalchemy import util
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

import adapters.postgres.models
from adapters.postgres.engine import create_engine

_queue = QueryBuilderEnvironment().settings
QUEUE_TABLES = frozenset(
    (_queue.queue_table, _queue.queue_table_log, _queue.statistics_table, _queue.schedules_table)
)
"""pgqueuer's own tables, named as migration 0001 installed them; `pgqueuer_job_runs` is ours
and modelled."""
CHUNK_VECTOR_INDEX = re.compile(r"ix_chunks_embedding_\d+")


def include_name(
    name: str | None, type_: NameFilterType, parent_names: NameFilterParentNames
) -> bool:
    """Which reflected objects autogenerate compares: not pgqueuer's tables (whose indexes and
    constraints go with them), nor the HNSW indexes made on demand."""
    if type_ == "table":
        return name not in QUEUE_TABLES
    if type_ == "index" and parent_names.get("table_name") == "chunks":
        return not CHUNK_VECTOR_INDEX.fullmatch(name or "")
    return True


def dialect_type(type_: TypeEngine[Any], dialect: Dialect) -> TypeEngine[Any]:
    """The type `dialect` (PostgreSQL's) gets for `type_`: its variant for the dialect or else
    none, and what a `TypeDecorator` stands for."""
    if type_._variant_mapping:
        variant = type_._variant_mapping.get(dialect.name)
        if variant is None:
            variant = copy.copy(type_)
            variant._variant_mapping = util.EMPTY_DICT
        type_ = variant
    if isinstance(type_, TypeDecorator):
        return dialect_type(type_.load_dialect_impl(dialect), dialect)
    return type_


def render_item(type_: str, obj: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    """Write the models' types into a new migration as plain PostgreSQL types, so that it needs
    neither advanced-alchemy's types (`DateTimeUTC` becomes `sa.DateTime(timezone=True)`,
    `JsonB` `postgresql.JSONB`) nor their variants for other databases; pgvector's types get
    the import Alembic would not add."""
    dialect = autogen_context.dialect
    if type_ != "type" or not isinstance(obj, TypeEngine) or dialect is None:
        return False
    resolved = dialect_type(obj, dialect)
    if type(resolved).__module__.startswith("pgvector."):
        autogen_context.imports.add("import pgvector.sqlalchemy")
        dim = getattr(resolved, "dim", None)
        return f"pgvector.sqlalchemy.{type(resolved).__name__}({'' if dim is None else dim})"
    if resolved is obj:
        return False
    # Alembic's own rendering of the resolved type, which calls this hook again: it is plain.
    return _repr_type(resolved, autogen_context)


def process_revision_directives(
    migration_context: MigrationContext, revision: Any, directives: list[Any]
) -> None:
    """An autogenerate that finds no difference writes no empty migration."""
    cmd_opts = getattr(context.config, "cmd_opts", None)
    if getattr(cmd_opts, "autogenerate", False) and directives[0].upgrade_ops.is_empty():
        directives[:] = []
        print("No difference between the models and the database: no migration written.")


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=adapters.postgres.models.metadata,
        transaction_per_migration=True,
        compare_type=True,
        compare_server_default=True,
        include_name=include_name,
        render_item=render_item,
        process_revision_directives=process_revision_directives,
    )
    with context.begin_transaction():
        context.run_migrations()


def _url() -> str:
    config = context.config
    url = config.attributes.get("url")
    # The `alembic` command reads its settings from pyproject.toml: there is no .ini section
    # to hold `sqlalchemy.url` unless one is given with -c.
    if not url and config.file_config.has_section(config.config_ini_section):
        url = config.get_main_option("sqlalchemy.url")
    if url:
        return str(url)
    from entrypoints.config import Settings
    from entrypoints.database import resolve_database

    return resolve_database(Settings.from_env()).owner_url


async def _main() -> None:
    engine = create_engine(_url(), pool_size=1)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run `agent-platform migrate`")
asyncio.run(_main())
