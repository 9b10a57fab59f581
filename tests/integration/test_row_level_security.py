"""The second wall: Postgres itself hides other organizations' rows from the app role."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from adapters.postgres.engine import create_engine, create_session_factory, org_session

pytestmark = pytest.mark.usefixtures("clean")


@pytest.fixture
async def factory(database):
    engine = create_engine(database.url, pool_size=2)
    yield create_session_factory(engine)
    await engine.dispose()


async def seed(owner_engine):
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO knowledge_bases (org_id, user_id, name, embedding_model, "
                "embedding_dimensions) VALUES ('org_a','u','A','local:m',3), "
                "('org_b','u','B','local:m',3)"
            )
        )


async def test_the_app_role_owns_nothing_and_cannot_bypass_rls(factory):
    async with org_session(factory, "org_a") as session:
        row = (
            await session.execute(
                text(
                    "SELECT current_user, r.rolsuper, r.rolbypassrls, "
                    "(SELECT count(*) FROM pg_tables WHERE tableowner = current_user) "
                    "FROM pg_roles r WHERE r.rolname = current_user"
                )
            )
        ).one()
    assert tuple(row) == ("agent_platform_app", False, False, 0)


async def test_a_query_without_the_organization_set_returns_no_rows(owner_engine, factory):
    await seed(owner_engine)
    async with org_session(factory, None) as session:
        count = await session.scalar(text("SELECT count(*) FROM knowledge_bases"))
    assert count == 0


async def test_a_query_that_forgets_its_filter_sees_only_its_organization(owner_engine, factory):
    await seed(owner_engine)
    async with org_session(factory, "org_a") as session:
        names = (await session.scalars(text("SELECT name FROM knowledge_bases"))).all()
        await session.commit()
        # The organization is set again for the transaction that follows the commit.
        again = (await session.scalars(text("SELECT name FROM knowledge_bases"))).all()
    assert names == ["A"] and again == ["A"]


async def test_writing_a_row_of_another_organization_is_refused(factory):
    async with org_session(factory, "org_a") as session:
        with pytest.raises(DBAPIError, match="row-level security"):
            await session.execute(
                text(
                    "INSERT INTO knowledge_bases (org_id, user_id, name, embedding_model, "
                    "embedding_dimensions) VALUES ('org_b','u','X','local:m',3)"
                )
            )


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
    engine = create_engine(login_url, pool_size=1)
    try:
        factory = create_session_factory(engine)
        async with org_session(factory, "org_a") as session:
            assert await session.scalar(text("SELECT current_user")) == "agent_platform_app"
            assert (await session.scalars(text("SELECT name FROM knowledge_bases"))).all() == ["A"]
            await session.execute(text("RESET ROLE"))
            assert await session.scalar(text("SELECT current_user")) == "ap_login"
            assert (await session.scalars(text("SELECT name FROM knowledge_bases"))).all() == ["A"]
    finally:
        await engine.dispose()
