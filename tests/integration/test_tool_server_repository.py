"""`PgToolServerRepository` against the real database: the fields as stored and read back,
name clashes, discoveries, organization isolation, and deletion out of the agents' grants."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from adapters.postgres.database import org_connection
from adapters.postgres.tool_servers import PgToolServerRepository
from application.ports.tool_server_repository import Discovery, NewToolServer
from domain.errors import Conflict, NotFound
from domain.tool_servers import ToolDefinition

pytestmark = pytest.mark.usefixtures("clean")
AT = datetime(2026, 2, 3, 4, 5, 6, tzinfo=UTC)
SEARCH = ToolDefinition(
    name="search", description="Finds", input_schema={"type": "object", "properties": {}}
)


def new(name: str = "docs", **changes) -> NewToolServer:
    fields = {
        "name": name, "kind": "mcp", "url": "http://127.0.0.1:9/mcp", "description": "",
        "header_names": ("Authorization",), "sealed_headers": b"sealed",
        "require_approval": "never", "enabled": True, **changes,
    }  # fmt: skip
    return NewToolServer(**fields)


async def test_fields_round_trip_and_discoveries(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        servers = PgToolServerRepository(db)
        added = await servers.add("org_a", "u1", new(require_approval=("search",)))
        assert (added.status, added.error, added.tools) == ("error", "Not refreshed yet", ())
        assert added.require_approval == ("search",) and added.header_names == ("Authorization",)
        found = await servers.record_discovery(
            "org_a", added.id, Discovery(tools=[SEARCH], error=None, at=AT)
        )
        assert (found.status, found.error, found.tools, found.refreshed_at) == (
            "ready", None, (SEARCH,), AT,
        )  # fmt: skip
        failed = await servers.record_discovery(
            "org_a", added.id, Discovery(tools=None, error="Timed out", at=AT)
        )
        assert (failed.status, failed.error, failed.tools) == ("error", "Timed out", (SEARCH,))
        changed = await servers.replace(
            "org_a", added.id, new(require_approval="always", sealed_headers=None, header_names=())
        )
        assert changed.require_approval == "always" and changed.tools == (SEARCH,)
        assert await servers.sealed_headers("org_a", added.id) is None
        await db.commit()
    async with org_connection(app_pool, "org_b") as db:
        others = PgToolServerRepository(db)
        assert await others.get("org_b", added.id) is None
        assert await others.list("org_b") == []
        assert not await others.delete("org_b", added.id)
        with pytest.raises(NotFound):
            await others.replace("org_b", added.id, new())


async def test_names_clash_within_an_organization_only(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        servers = PgToolServerRepository(db)
        first = await servers.add("org_a", "u1", new("docs"))
        second = await servers.add("org_a", "u1", new("other"))
        await db.commit()
        with pytest.raises(Conflict):
            await servers.add("org_a", "u1", new("docs"))
        await db.rollback()
        with pytest.raises(Conflict):
            await servers.replace("org_a", second.id, new("docs"))
        await db.rollback()
        assert [s.id for s in await servers.list("org_a", [second.id])] == [second.id]
        assert [s.name for s in await servers.list("org_a")] == ["docs", "other"]
        assert first.id != second.id
    async with org_connection(app_pool, "org_b") as db:
        assert (await PgToolServerRepository(db).add("org_b", "u2", new("docs"))).name == "docs"
        await db.commit()


async def test_delete_takes_the_server_off_every_agent(app_pool, owner_engine):
    async with org_connection(app_pool, "org_a") as db:
        servers = PgToolServerRepository(db)
        gone = await servers.add("org_a", "u1", new("gone"))
        kept = await servers.add("org_a", "u1", new("kept"))
        await db.commit()
    grants = (
        f'[{{"toolServerId": {gone.id}, "names": null}}, '
        f'{{"toolServerId": {kept.id}, "names": ["search"]}}]'
    )
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO agents (org_id, user_id, name, description, role, model, tools) "
                "VALUES ('org_a', 'u1', 'A', '', '', 'local:x', CAST(:g AS jsonb))"
            ),
            {"g": grants},
        )
    async with org_connection(app_pool, "org_a") as db:
        assert await PgToolServerRepository(db).delete("org_a", gone.id)
        await db.commit()
    async with owner_engine.connect() as connection:
        left = (await connection.execute(text("SELECT tools FROM agents"))).scalar_one()
    assert left == [{"toolServerId": kept.id, "names": ["search"]}]


async def test_servers_read_for_a_grant_wait_for_it_before_they_are_deleted(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        added = await PgToolServerRepository(db).add("org_a", "u1", new())
        await db.commit()
    async with (
        org_connection(app_pool, "org_a") as granting,
        org_connection(app_pool, "org_a") as deleting,
    ):
        locked = await PgToolServerRepository(granting).list("org_a", [added.id], lock=True)
        assert [s.id for s in locked] == [added.id]
        deletion = asyncio.ensure_future(PgToolServerRepository(deleting).delete("org_a", added.id))
        await asyncio.sleep(0.3)
        assert not deletion.done()  # it waits for the grant's unit of work
        await granting.commit()
        assert await asyncio.wait_for(deletion, 10)
        await deleting.commit()
