"""The second wall: Postgres itself hides other organizations' rows from the app role."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from sqlalchemy import text

from adapters.postgres.database import FairGate, create_pool, org_connection

pytestmark = pytest.mark.usefixtures("clean")


async def seed(owner_engine):
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO knowledge_bases (org_id, user_id, name, embedding_model, "
                "embedding_dimensions) VALUES ('org_a','u','A','local:m',3), "
                "('org_b','u','B','local:m',3)"
            )
        )


async def names(db) -> list[str]:
    return [r[0] for r in await db.fetch("SELECT name FROM knowledge_bases ORDER BY name")]


async def test_the_app_role_owns_nothing_and_cannot_bypass_rls(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        (row,) = await db.fetch(
            "SELECT current_user, r.rolsuper, r.rolbypassrls, "
            "(SELECT count(*) FROM pg_tables WHERE tableowner = current_user) "
            "FROM pg_roles r WHERE r.rolname = current_user"
        )
    assert tuple(row) == ("agent_platform_app", False, False, 0)


async def test_the_app_roles_policies_are_the_organization_check_alone(app_pool):
    # The owner's way through is a policy of its own (migration 0017): a sub-query in a policy
    # that applies to everyone would be planned into every statement the app role runs.
    async with org_connection(app_pool, "org_a") as db:
        applied = await db.fetch(
            "SELECT tablename, policyname, qual, with_check FROM pg_policies "
            "WHERE schemaname = current_schema() AND ('public' = ANY(roles) "
            "OR current_user = ANY(roles))"
        )
        plan = "\n".join(
            r[0]
            for r in await db.fetch(
                "EXPLAIN SELECT kb.name, st.file_count FROM knowledge_bases kb "
                "LEFT JOIN knowledge_base_stats st ON st.knowledge_base_id = kb.id "
                "LEFT JOIN knowledge_base_files f ON f.knowledge_base_id = kb.id"
            )
        )
    check = "((org_id)::text = current_setting('app.org_id'::text, true))"
    assert len(applied) >= 25
    for table, policy, qual, with_check in applied:
        assert (policy, qual, with_check) == ("org_isolation", check, check), table
    assert "InitPlan" not in plan and "pg_class" not in plan, plan


async def test_a_query_without_the_organization_set_returns_no_rows(owner_engine, app_pool):
    await seed(owner_engine)
    async with org_connection(app_pool, None) as db:
        assert await names(db) == []
    async with app_pool.acquire() as raw:
        # A connection used without org_connection sees nothing either.
        assert await raw.fetchval("SELECT count(*) FROM knowledge_bases") == 0


async def test_a_query_that_forgets_its_filter_sees_only_its_organization(owner_engine, app_pool):
    await seed(owner_engine)
    async with org_connection(app_pool, "org_a") as db:
        before = await names(db)
        await db.begin()
        inside = await names(db)
        await db.commit()
        after = await names(db)
    assert before == inside == after == ["A"]


async def test_the_organization_never_outlives_its_checkout(owner_engine, app_pool):
    await seed(owner_engine)
    for _ in range(3):
        async with org_connection(app_pool, "org_a") as db:
            assert await names(db) == ["A"]
        async with app_pool.acquire() as raw:
            assert await raw.fetchval("SELECT current_setting('app.org_id', true)") in ("", None)
            assert await raw.fetchval("SELECT current_user") == "agent_platform_app"


async def test_writing_a_row_of_another_organization_is_refused(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        with pytest.raises(asyncpg.PostgresError, match="row-level security"):
            await db.execute(
                "INSERT INTO knowledge_bases (org_id, user_id, name, embedding_model, "
                "embedding_dimensions) VALUES ('org_b','u','X','local:m',3)"
            )


async def test_uncommitted_writes_are_rolled_back(owner_engine, app_pool):
    async with org_connection(app_pool, "org_a") as db:
        await db.execute(
            "INSERT INTO knowledge_bases (org_id, user_id, name, embedding_model, "
            "embedding_dimensions) VALUES ('org_a','u','X','local:m',3)"
        )
    async with owner_engine.connect() as connection:
        assert await connection.scalar(text("SELECT count(*) FROM knowledge_bases")) == 0


async def test_a_separate_login_role_works_and_gains_nothing_by_leaving_the_app_role(
    database, owner_engine
):
    """The production set-up: the app logs in as a role that is only a member of the app
    role; the schema owner runs the migrations."""
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ap_login') "
                "THEN CREATE ROLE ap_login LOGIN; END IF; END $$"
            )
        )
        await connection.execute(text("GRANT agent_platform_app TO ap_login"))
    await seed(owner_engine)
    login_url = database.url.replace("postgres@", "ap_login@", 1)
    login_pool = await create_pool(login_url, app_role="agent_platform_app", size=1)
    try:
        async with org_connection(login_pool, "org_a") as db:
            assert (await db.fetch("SELECT current_user"))[0][0] == "agent_platform_app"
            assert await names(db) == ["A"]
            await db.raw.execute("RESET ROLE")
            assert (await db.fetch("SELECT current_user"))[0][0] == "ap_login"
            assert await names(db) == ["A"]
    finally:
        await login_pool.close()


async def test_the_gate_admits_in_arrival_order_and_survives_cancellation():
    gate = FairGate(1)
    order: list[int] = []
    release = asyncio.Event()

    async def holder() -> None:
        async with gate:
            await release.wait()

    async def waiter(n: int) -> None:
        async with gate:
            order.append(n)

    first = asyncio.create_task(holder())
    await asyncio.sleep(0)
    tasks = [asyncio.create_task(waiter(n)) for n in range(5)]
    await asyncio.sleep(0)
    tasks[2].cancel()
    release.set()
    await asyncio.gather(first, *tasks, return_exceptions=True)
    assert order == [0, 1, 3, 4]
    async with gate:
        pass
