"""Tool server use cases with fakes: the fields' rules, who may manage, organization scoping,
the address check, discovery outside the transaction, sealed headers and the audit log."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from application.tool_discovery import ToolServerSession
from application.use_cases.create_tool_server import CreateToolServer, CreateToolServerCommand
from application.use_cases.delete_tool_server import DeleteToolServer, DeleteToolServerCommand
from application.use_cases.list_tool_servers import ListToolServers, ListToolServersQuery
from application.use_cases.refresh_tool_server import RefreshToolServer, RefreshToolServerCommand
from application.use_cases.update_tool_server import UpdateToolServer, UpdateToolServerCommand
from domain.errors import Conflict, Forbidden, Invalid, NotFound
from domain.identity import ADMIN_ROLE, AGENTS_MANAGE, Caller
from domain.tool_server_fields import (
    HEADERS_UNREADABLE,
    TOOL_SERVER_CREATED,
    TOOL_SERVER_DELETED,
    TOOL_SERVER_REFRESHED,
    TOOL_SERVER_UPDATED,
)
from domain.tool_servers import (
    ADDRESS_NOT_ALLOWED,
    HEADERS_FOR_NEW_HOST,
    TOOL_SERVER_CHANGED,
    TOOL_SERVER_NAME_TAKEN,
)
from domain.values import UNSET
from tests.fakes import FakeUnitOfWork
from tests.fakes.basics import FakeClock
from tests.fakes.members import FakeAuditLog
from tests.fakes.tool_servers import (
    FakeSecretBox,
    FakeToolConnector,
    FakeToolServerRepository,
    tool,
)

ADMIN = Caller(user_id="user_1", org_id="org_a", role=ADMIN_ROLE)
MANAGER = Caller(user_id="user_2", org_id="org_a", permissions=frozenset({AGENTS_MANAGE}))
MEMBER = Caller(user_id="user_3", org_id="org_a")
STRANGER = Caller(user_id="user_9", org_id="org_b", role=ADMIN_ROLE)
URL = "http://127.0.0.1:9/mcp"
SECRET = "Bearer s3cr3t-value"


@dataclass
class World:
    servers: FakeToolServerRepository = field(default_factory=FakeToolServerRepository)
    connector: FakeToolConnector = field(default_factory=FakeToolConnector)
    box: FakeSecretBox = field(default_factory=FakeSecretBox)
    clock: FakeClock = field(default_factory=FakeClock)
    audit: FakeAuditLog = field(default_factory=FakeAuditLog)
    sessions_opened: int = 0
    open: int = 0

    def __post_init__(self) -> None:
        self.uow = FakeUnitOfWork(self.servers, self.audit)
        self.connector.tools[URL] = [tool("search", query={"type": "string"}), tool("fetch")]

    @asynccontextmanager
    async def session(self, caller: Caller) -> AsyncIterator[ToolServerSession]:
        self.sessions_opened += 1
        self.open += 1
        try:
            yield ToolServerSession(servers=self.servers, audit=self.audit, uow=self.uow)
        finally:
            self.open -= 1

    def _args(self) -> tuple:
        return (self.session, self.connector, self.box, self.clock)

    async def create(self, caller: Caller = ADMIN, **fields: object):
        fields = {"name": "docs", "kind": "mcp", "url": URL, **fields}
        command = CreateToolServerCommand.parse(caller=caller, **fields)
        return await CreateToolServer(*self._args()).execute(command)

    async def update(self, server_id: int, caller: Caller = ADMIN, **fields: object):
        command = UpdateToolServerCommand.parse(caller=caller, tool_server_id=server_id, **fields)
        return await UpdateToolServer(*self._args()).execute(command)

    async def refresh(self, server_id: int, caller: Caller = ADMIN):
        command = RefreshToolServerCommand.parse(caller=caller, tool_server_id=server_id)
        return await RefreshToolServer(*self._args()).execute(command)

    async def delete(self, server_id: int, caller: Caller = ADMIN) -> None:
        command = DeleteToolServerCommand.parse(caller=caller, tool_server_id=server_id)
        await DeleteToolServer(self.servers, self.audit, self.uow).execute(command)

    async def read(self, caller: Caller = ADMIN, server_id: object = None):
        query = ListToolServersQuery.parse(caller=caller, tool_server_id=server_id)
        return await ListToolServers(self.servers).execute(query)


@pytest.fixture
def world() -> World:
    return World()


async def test_create_discovers_the_tools_and_seals_the_headers(world):
    server = await world.create(headers={"Authorization": SECRET}, description=" Docs ")
    assert (server.status, server.error, server.description) == ("ready", None, "Docs")
    assert [t.name for t in server.tools] == ["search", "fetch"]
    assert server.header_names == ("Authorization",)
    assert server.refreshed_at == world.clock.now()
    sealed = world.servers.sealed[server.id]
    assert sealed is not None and SECRET.encode() not in sealed
    assert json.loads(world.box.open(sealed)) == {"Authorization": SECRET}
    assert world.connector.discovered[0].headers == {"Authorization": SECRET}
    assert world.uow.commits == 1
    (entry,) = world.audit.of("org_a")
    assert entry.action == TOOL_SERVER_CREATED and SECRET not in json.dumps(entry.details)


async def test_a_manager_may_create_and_a_member_may_only_read(world):
    await world.create(caller=MANAGER)
    with pytest.raises(Forbidden):
        await world.create(caller=MEMBER, name="other")
    with pytest.raises(Forbidden):
        await world.create(caller=MEMBER, name="")  # who before what
    assert [s.name for s in await world.read(MEMBER)] == ["docs"]


async def test_an_address_not_allowed_is_400_and_nothing_is_stored(world):
    world.connector.refused.add("127.0.0.1")
    with pytest.raises(Invalid) as refused:
        await world.create()
    assert refused.value.message == ADDRESS_NOT_ALLOWED
    assert world.servers.rows == {} and world.connector.discovered == []


async def test_an_unreachable_server_is_created_with_its_error(world):
    world.connector.failures[URL] = "Connection refused"
    server = await world.create()
    assert (server.status, server.error, server.tools) == ("error", "Connection refused", ())
    assert world.uow.commits == 1


async def test_a_duplicate_name_is_409_before_any_connection(world):
    await world.create()
    with pytest.raises(Conflict) as clash:
        await world.create()
    assert clash.value.message == TOOL_SERVER_NAME_TAKEN
    assert len(world.connector.discovered) == 1
    other = await world.create(caller=STRANGER)  # another organization's name space
    assert other.name == "docs"


@pytest.mark.parametrize(
    ("fields", "field_name"),
    [
        ({"name": None}, "name"),
        ({"name": "Not Valid"}, "name"),
        ({"name": "a" * 65}, "name"),
        ({"name": "-a"}, "name"),
        ({"kind": "grpc"}, "kind"),
        ({"kind": None}, "kind"),
        ({"url": None}, "url"),
        ({"url": "ftp://example.com/x"}, "url"),
        ({"url": "http://"}, "url"),
        ({"url": "http://user:pw@example.com/"}, "url"),
        ({"url": "http://example.com/a b"}, "url"),
        ({"url": "http://example.com:99999/"}, "url"),
        ({"url": "http://example.com/" + "a" * 2048}, "url"),
        ({"description": "x" * 1025}, "description"),
        ({"description": 5}, "description"),
        ({"headers": ["a"]}, "headers"),
        ({"headers": {f"X-{i}": "v" for i in range(21)}}, "headers"),
        ({"headers": {"Bad Name": "v"}}, "headers"),
        ({"headers": {"X-A": "v", "x-a": "w"}}, "headers"),
        ({"headers": {"X-A": "v\r\nX-B: w"}}, "headers"),
        ({"headers": {"X-A": 5}}, "headers"),
        ({"headers": {"X-A": "caf\u00e9"}}, "headers"),
        ({"headers": {"X-A": "v" * 8193}}, "headers"),
        ({"require_approval": "sometimes"}, "requireApproval"),
        ({"require_approval": [""]}, "requireApproval"),
        ({"require_approval": ["a" * 129]}, "requireApproval"),
        ({"require_approval": ["t"] * 501}, "requireApproval"),
        ({"require_approval": [5]}, "requireApproval"),
        ({"enabled": "yes"}, "enabled"),
    ],
)
async def test_each_bad_field_is_400_naming_it(world, fields, field_name):
    with pytest.raises(Invalid) as bad:
        await world.create(**fields)
    assert bad.value.details[0]["field"] == field_name
    assert "v\r\n" not in bad.value.message and "8193" not in str(bad.value.details)
    assert world.servers.rows == {}


async def test_defaults_and_approval_lists(world):
    server = await world.create(require_approval=["search", "search", "fetch"])
    assert server.require_approval == ("search", "fetch")
    assert server.enabled is True and server.needs_approval("fetch")
    always = await world.create(name="b", require_approval="always", enabled=False)
    assert always.require_approval == "always" and always.enabled is False


async def test_listing_and_reading_stay_in_the_organization(world):
    server = await world.create()
    assert await world.read(STRANGER) == []
    with pytest.raises(NotFound):
        await world.read(STRANGER, server.id)
    assert (await world.read(MEMBER, server.id))[0].id == server.id
    with pytest.raises(Invalid):
        await world.read(MEMBER, "abc")


async def test_update_changes_only_what_is_sent(world):
    server = await world.create(headers={"Authorization": SECRET})
    changed = await world.update(server.id, description="new", enabled=False)
    assert (changed.description, changed.enabled, changed.name) == ("new", False, "docs")
    assert changed.header_names == ("Authorization",)
    assert len(world.connector.discovered) == 1  # nothing about the connection changed
    assert world.audit.of("org_a")[-1].action == TOOL_SERVER_UPDATED
    assert world.audit.of("org_a")[-1].details["changed"] == ["description", "enabled"]


async def test_headers_sent_replace_them_all_and_rediscover(world):
    server = await world.create(headers={"Authorization": SECRET, "X-Team": "a"})
    changed = await world.update(server.id, headers={"X-Other": "b"})
    assert changed.header_names == ("X-Other",)
    assert json.loads(world.box.open(world.servers.sealed[server.id])) == {"X-Other": "b"}
    assert world.connector.discovered[-1].headers == {"X-Other": "b"}
    cleared = await world.update(server.id, headers=None)
    assert cleared.header_names == () and world.servers.sealed[server.id] is None


async def test_a_url_change_checks_the_address_first(world):
    server = await world.create(headers={"Authorization": SECRET})
    world.connector.refused.add("http://127.0.0.1:9/other")
    with pytest.raises(Invalid) as refused:
        await world.update(server.id, url="http://127.0.0.1:9/other")
    assert refused.value.message == ADDRESS_NOT_ALLOWED
    assert (await world.read(ADMIN, server.id))[0].url == URL
    world.connector.tools["http://127.0.0.1:9/v2"] = [tool("v2")]
    moved = await world.update(server.id, url="http://127.0.0.1:9/v2")
    assert [t.name for t in moved.tools] == ["v2"]
    assert world.connector.discovered[-1].headers == {"Authorization": SECRET}


async def test_moving_to_another_host_needs_the_headers_again(world):
    server = await world.create(headers={"Authorization": SECRET})
    asked = len(world.connector.discovered)
    for elsewhere in (
        "http://127.0.0.2:9/mcp",
        "http://127.0.0.1:10/mcp",
        "https://127.0.0.1:9/mcp",
    ):
        with pytest.raises(Invalid) as refused:
            await world.update(server.id, url=elsewhere)
        assert refused.value.message == HEADERS_FOR_NEW_HOST
    assert len(world.connector.discovered) == asked  # the secret went nowhere
    assert (await world.read(ADMIN, server.id))[0].url == URL
    world.connector.tools["http://127.0.0.2:9/mcp"] = [tool("moved")]
    moved = await world.update(server.id, url="http://127.0.0.2:9/mcp", headers={"A": "new"})
    assert [t.name for t in moved.tools] == ["moved"]
    assert world.connector.discovered[-1].headers == {"A": "new"}
    plain = await world.create(name="plain")
    assert (await world.update(plain.id, url="http://127.0.0.2:9/mcp")).url.endswith(":9/mcp")


async def test_a_host_that_does_not_resolve_is_created_with_its_error(world):
    world.connector.unresolved.add(URL)
    server = await world.create()
    assert (server.status, server.error) == ("error", "The tool server's host does not resolve")


async def test_update_rules(world):
    server = await world.create()
    await world.create(name="other")
    with pytest.raises(Conflict):
        await world.update(server.id, name="other")
    with pytest.raises(NotFound):
        await world.update(server.id, caller=STRANGER, name="x")
    with pytest.raises(Forbidden):
        await world.update(server.id, caller=MEMBER, name="x")
    with pytest.raises(Invalid):
        await world.update(server.id, name=None)
    with pytest.raises(Invalid):
        await world.update(0, name="x")
    renamed = await world.update(server.id, name="docs-2")
    assert renamed.name == "docs-2"


async def test_refresh_keeps_the_tools_when_the_server_fails(world):
    server = await world.create()
    world.connector.failures[URL] = "Timed out after 30 s"
    world.clock.advance(60)
    failed = await world.refresh(server.id)
    assert (failed.status, failed.error) == ("error", "Timed out after 30 s")
    assert [t.name for t in failed.tools] == ["search", "fetch"]
    assert failed.refreshed_at == world.clock.now()
    del world.connector.failures[URL]
    world.connector.tools[URL] = [tool("only")]
    ready = await world.refresh(server.id)
    assert (ready.status, ready.error, [t.name for t in ready.tools]) == ("ready", None, ["only"])
    assert world.audit.of("org_a")[-1].action == TOOL_SERVER_REFRESHED


async def test_refresh_with_headers_no_key_opens(world):
    server = await world.create(headers={"Authorization": SECRET})
    world.box.keys = (0x11,)
    failed = await world.refresh(server.id)
    assert (failed.status, failed.error) == ("error", HEADERS_UNREADABLE)


async def test_refresh_rules(world):
    server = await world.create()
    with pytest.raises(NotFound):
        await world.refresh(server.id, caller=STRANGER)
    with pytest.raises(Forbidden):
        await world.refresh(server.id, caller=MEMBER)


async def test_delete_removes_it_from_every_agent(world):
    server = await world.create()
    other = await world.create(name="other")
    world.servers.agent_tools[1] = [
        {"toolServerId": server.id, "names": None},
        {"toolServerId": other.id, "names": ["search"]},
    ]
    with pytest.raises(NotFound):
        await world.delete(server.id, caller=STRANGER)
    with pytest.raises(Forbidden):
        await world.delete(server.id, caller=MEMBER)
    await world.delete(server.id)
    assert world.servers.agent_tools[1] == [{"toolServerId": other.id, "names": ["search"]}]
    assert [s.name for s in await world.read()] == ["other"]
    assert world.audit.of("org_a")[-1].action == TOOL_SERVER_DELETED
    with pytest.raises(NotFound):
        await world.delete(server.id)


async def test_changes_parse_only_what_is_sent():
    command = UpdateToolServerCommand.parse(caller=ADMIN, tool_server_id=3, enabled=UNSET)
    assert command.changes.enabled is UNSET and command.server_id == 3


async def test_no_unit_of_work_is_open_while_a_server_is_asked(world):
    asked: list[int] = []

    def tools(endpoint):
        asked.append(world.open)
        return [tool("search")]

    world.connector.tools[URL] = tools
    server = await world.create()
    await world.refresh(server.id)
    await world.update(server.id, headers={"X-Key": "k"})
    assert asked == [0, 0, 0] and world.sessions_opened >= 6


async def test_a_change_made_while_the_server_is_asked_is_not_overwritten(world):
    server = await world.create()

    def tools(endpoint):
        current = world.servers.rows[server.id]
        world.servers.rows[server.id] = dataclasses.replace(current, description="theirs")
        world.servers.rows[server.id] = dataclasses.replace(
            world.servers.rows[server.id], updated_at=world.servers._tick()
        )
        return [tool("search")]

    world.connector.tools[URL] = tools
    with pytest.raises(Conflict, match=TOOL_SERVER_CHANGED):
        await world.update(server.id, headers={"X-Key": "k"}, description="mine")
    assert world.servers.rows[server.id].description == "theirs"
