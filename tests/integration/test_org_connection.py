"""`org_connection`: the scope it sets, and what a connection carries back into the pool."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import asyncpg
import pytest
from sqlalchemy import text

from adapters.postgres.database import FairGate, create_pool, org_connection


async def setting(db, name: str) -> str:
    rows = await db.fetch("SELECT current_setting($1)", name)
    return str(rows[0][0])


async def test_a_relaxed_commit_and_the_organization_do_not_outlive_the_checkout(app_pool):
    async with org_connection(app_pool, "org_a", synchronous_commit=False) as db:
        assert await setting(db, "synchronous_commit") == "off"
        assert await setting(db, "app.org_id") == "org_a"
    # Every connection of the pool at once, so the one just released is among them.
    async with org_connection(app_pool, None) as first, org_connection(app_pool, None) as second:
        for db in (first, second):
            assert await setting(db, "synchronous_commit") == "on"
            assert await setting(db, "app.org_id") == ""


async def test_the_gate_admits_the_next_caller_once_the_connection_is_back(app_pool):
    gate = FairGate(1)
    async with org_connection(app_pool, "org_a", gate) as db:
        await db.fetch("SELECT 1")
    async with asyncio.timeout(5):
        async with org_connection(app_pool, "org_b", gate) as db:
            assert await setting(db, "app.org_id") == "org_b"


async def test_a_failed_block_rolls_back_and_releases_at_once(app_pool):
    gate = FairGate(1)
    try:
        async with org_connection(app_pool, "org_a", gate) as db:
            await db.execute("CREATE TEMP TABLE scratch (n int)")
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    async with org_connection(app_pool, "org_a", gate) as db:
        rows = await db.fetch("SELECT to_regclass('pg_temp.scratch') IS NULL")
        assert rows[0][0] is True


async def test_a_scoped_checkout_goes_back_without_a_reset_and_any_checkout_is_scoped(
    app_pool, owner_engine
):
    async with org_connection(app_pool, "org_a") as db:
        rows = await db.fetch("SELECT pg_backend_pid(), 'the last statement'")
    pid = rows[0][0]
    async with owner_engine.connect() as connection:
        last = await connection.scalar(
            text("SELECT query FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
        )
    assert "the last statement" in last  # nothing ran on the release
    # A checkout that is not org_connection's is scoped to no organization all the same.
    async with app_pool.acquire() as first, app_pool.acquire() as second:
        for raw in (first, second):
            assert await raw.fetchval("SELECT current_setting('app.org_id')") == ""
            assert await raw.fetchval("SELECT count(*) FROM knowledge_bases") == 0


async def test_a_block_that_failed_goes_back_through_the_full_reset(app_pool, owner_engine):
    async def terminate_soon(pid: int) -> None:
        await asyncio.sleep(0.3)
        async with owner_engine.connect() as connection:
            await connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})

    with pytest.raises((asyncpg.AdminShutdownError, asyncpg.ConnectionDoesNotExistError)):
        async with org_connection(app_pool, "org_a") as db:
            pid = await db.raw.fetchval("SELECT pg_backend_pid()")
            # As when the server shuts down: the statement in flight fails, the backend goes.
            killer = asyncio.create_task(terminate_soon(pid))
            await db.raw.fetchval("SELECT pg_sleep(10)")
    await killer
    # The broken connection was closed on release, not pooled: the next checkouts work.
    async with (
        org_connection(app_pool, "org_a") as first,
        org_connection(app_pool, "org_a") as second,
    ):
        for db in (first, second):
            assert await db.raw.fetchval("SELECT pg_backend_pid()") != pid
    with pytest.raises(ValueError):
        async with org_connection(app_pool, "org_a") as db:
            pid = await db.raw.fetchval("SELECT pg_backend_pid()")
            raise ValueError("a failed block")
    async with owner_engine.connect() as connection:
        last = await connection.scalar(
            text("SELECT query FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
        )
    assert "RESET ALL" in last  # asyncpg's reset query ran on the release


async def test_any_other_checkout_is_reset_in_full_on_release(app_pool):
    async with app_pool.acquire() as raw:
        await raw.execute("SET statement_timeout = '1234ms'")
        await raw.execute("SELECT pg_advisory_lock(42)")
    async with app_pool.acquire() as first, app_pool.acquire() as second:
        for raw in (first, second):
            assert await raw.fetchval("SELECT current_setting('statement_timeout')") == "0"
            assert await raw.fetchval("SELECT count(*) FROM pg_locks WHERE objid = 42") == 0


async def test_a_members_checkout_reads_their_removal_whatever_the_connection_was_scoped_to(
    database, owner_engine
):
    """The removal is read in the scope statement, after it has set the organization: a
    connection last scoped to another organization (or none) still finds the member's row,
    which row-level security would hide from a read made before."""
    removed = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    async with owner_engine.begin() as connection:
        await connection.execute(
            text("INSERT INTO membership_removals VALUES ('org_a', 'user_scope_r', :at)"),
            {"at": removed},
        )
    pool = await create_pool(database.url, app_role="agent_platform_app", size=1)
    try:
        for before in ("org_b", None, "org_a"):
            async with org_connection(pool, before):
                pass
            async with org_connection(pool, "org_a", member="user_scope_r") as db:
                assert db.removed_at == removed, before
                assert await setting(db, "app.org_id") == "org_a"
            async with org_connection(pool, "org_b", member="user_scope_r") as db:
                assert db.removed_at is None  # a removal from another organization is not theirs
            async with org_connection(pool, "org_a", member="someone_else") as db:
                assert db.removed_at is None
    finally:
        await pool.close()
        async with owner_engine.begin() as connection:
            await connection.execute(
                text("DELETE FROM membership_removals WHERE user_id = 'user_scope_r'")
            )
