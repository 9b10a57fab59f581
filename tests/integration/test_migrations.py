"""Every migration runs up and down, twice, on a database of its own; every tenant table is
secured. That the models describe the migrated schema: see test_schema_models.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import text

from adapters.postgres.embedded import start_embedded_postgres
from adapters.postgres.engine import create_engine
from adapters.postgres.migrations import alembic_config, downgrade, migrate


async def tables(url: str) -> set[str]:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            )
            return {r[0] for r in rows}
    finally:
        await engine.dispose()


async def test_all_migrations_go_up_and_down(tmp_root):
    _, url = start_embedded_postgres(tmp_root / "pg", database="ap_migrations")
    from alembic.script import ScriptDirectory

    revisions = list(ScriptDirectory.from_config(alembic_config(url)).walk_revisions())
    assert revisions, "no migrations found"
    for _ in range(2):
        await migrate(url)
        assert {"knowledge_bases", "knowledge_base_files", "pgqueuer"} <= await tables(url)
        await downgrade(url)
        assert await tables(url) <= {"alembic_version"}
    await migrate(url)


async def test_every_tenant_table_has_org_id_and_forced_row_level_security(owner_engine, database):
    async with owner_engine.connect() as connection:
        rows = (
            await connection.execute(
                text(
                    "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, "
                    "EXISTS (SELECT 1 FROM information_schema.columns i "
                    "        WHERE i.table_name = c.relname AND i.column_name = 'org_id') "
                    "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = 'public' AND c.relkind = 'r' "
                    "AND c.relname NOT LIKE 'pgqueuer%' "
                    # Webhook message ids come before any organization is known.
                    "AND c.relname NOT IN ('alembic_version', 'webhook_receipts')"
                )
            )
        ).all()
    assert rows
    for name, rls, forced, has_org in rows:
        assert rls and forced and has_org, name


def test_the_alembic_command_reads_its_settings_from_pyproject(database):
    # README, "Adding a migration": the `alembic` command itself, run from the repository.
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [str(Path(sys.executable).parent / "alembic"), "current"],
        cwd=root,
        env={**os.environ, "AP_DATABASE_URL": database.url},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "(head)" in done.stdout
