"""`org_connection`: the scope it sets, and what a connection carries back into the pool."""

from __future__ import annotations

import asyncio

from adapters.postgres.database import FairGate, org_connection


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
    # The release runs in the background; the gate's place comes back with the connection.
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
