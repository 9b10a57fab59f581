"""`ServerTools`: the tools of tool servers offered to agents (allow-lists, disabled servers,
names cut and colliding, `find_tools` past the limit) and their calls (headers decrypted,
failures as `ToolFailed`, servers gone, the audit entry)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pytest

from application.ports.agent_tool import ToolApprovalRequired, ToolContext, ToolFailed, ToolOffer
from application.ports.chat_model import ToolCall
from application.ports.tool_connector import ToolEndpoint, ToolOutput, ToolServerUnreachable
from application.tool_discovery import ToolServerSession
from application.tools.find_tools import FIND_TOOLS
from application.tools.registry import ToolRegistry
from application.tools.server_tools import NO_LONGER_AVAILABLE, TOOL_CALLED, ServerTools
from domain.agents import Agent
from domain.identity import Caller
from domain.tool_servers import ToolDefinition, ToolGrant, ToolServer
from tests.fakes import FakeUnitOfWork
from tests.fakes.agents import an_agent
from tests.fakes.members import FakeAuditLog

CALLER = Caller(user_id="user_1", org_id="org_a")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def tool(name: str, description: str = "", schema: dict[str, Any] | None = None) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=description or f"The {name} tool.",
        input_schema=schema if schema is not None else {"type": "object", "properties": {}},
    )


def server(server_id: int, name: str, *tools: ToolDefinition, **changes: Any) -> ToolServer:
    fields: dict[str, Any] = {
        "id": server_id,
        "org_id": "org_a",
        "user_id": "user_1",
        "name": name,
        "kind": "mcp",
        "url": f"http://127.0.0.1:9/{name}",
        "description": "",
        "header_names": (),
        "require_approval": "never",
        "enabled": True,
        "status": "ready",
        "error": None,
        "tools": tools,
        "refreshed_at": NOW,
        "created_at": NOW,
        "updated_at": NOW,
    }
    return ToolServer(**{**fields, **changes})


class Box:
    """`SecretBox` that marks what it seals; a token it did not seal does not open."""

    def seal(self, plaintext: bytes) -> bytes:
        return b"sealed:" + plaintext

    def open(self, token: bytes) -> bytes:
        if not token.startswith(b"sealed:"):
            raise ValueError("not sealed here")
        return token.removeprefix(b"sealed:")


@dataclass
class Servers:
    """A `ToolServerRepository` in memory (the reads the tools make)."""

    servers: dict[int, ToolServer] = field(default_factory=dict)
    sealed: dict[int, bytes] = field(default_factory=dict)
    lists: int = 0

    async def list(
        self, org_id: str, server_ids: Sequence[int] | None = None, *, lock: bool = False
    ) -> list[ToolServer]:
        self.lists += 1
        found = [
            s
            for s in self.servers.values()
            if s.org_id == org_id and (server_ids is None or s.id in server_ids)
        ]
        return sorted(found, key=lambda s: s.name)

    async def get(self, org_id: str, server_id: int) -> ToolServer | None:
        found = self.servers.get(server_id)
        return found if found is not None and found.org_id == org_id else None

    async def sealed_headers(self, org_id: str, server_id: int) -> bytes | None:
        return self.sealed.get(server_id) if await self.get(org_id, server_id) else None


@dataclass
class Connector:
    """A `ToolConnector` whose calls answer `output`, or raise `failure`."""

    output: ToolOutput = field(default_factory=lambda: ToolOutput(content=[]))
    failure: Exception | None = None
    calls: list[tuple[ToolEndpoint, ToolDefinition, dict[str, Any]]] = field(default_factory=list)

    async def check_address(self, url: str) -> None:
        return None

    async def discover(self, endpoint: ToolEndpoint) -> list[ToolDefinition]:
        return []

    async def call(
        self, endpoint: ToolEndpoint, tool: ToolDefinition, arguments: dict[str, Any]
    ) -> ToolOutput:
        self.calls.append((endpoint, tool, arguments))
        if self.failure is not None:
            raise self.failure
        return self.output


@dataclass
class World:
    servers: Servers = field(default_factory=Servers)
    connector: Connector = field(default_factory=Connector)
    audit: FakeAuditLog = field(default_factory=FakeAuditLog)
    uow: FakeUnitOfWork = field(default_factory=FakeUnitOfWork)
    sessions_opened: int = 0

    @asynccontextmanager
    async def session(self, caller: Caller) -> AsyncIterator[ToolServerSession]:
        assert caller == CALLER
        self.sessions_opened += 1
        yield ToolServerSession(servers=self.servers, audit=self.audit, uow=self.uow)

    def tools(self, max_offered: int = 20) -> ServerTools:
        return ServerTools(self.session, Box(), self.connector, max_offered=max_offered)

    def add(self, *servers: ToolServer) -> None:
        for s in servers:
            self.servers.servers[s.id] = s


def agent(*grants: tuple[int, tuple[str, ...] | None]) -> Agent:
    return an_agent(tools=tuple(ToolGrant(tool_server_id=i, names=n) for i, n in grants))


async def offers(world: World, the_agent: Agent, **kw: Any) -> list[ToolOffer]:
    offered = await world.tools(**kw).offer(CALLER, the_agent)
    return list(offered or [])


def names(offered: Sequence[ToolOffer]) -> list[str]:
    return [offer.spec.name for offer in offered]


# Offering


async def test_an_agent_without_tools_is_offered_none_and_nothing_is_read():
    world = World()
    assert await world.tools().offer(CALLER, an_agent()) is None
    assert world.sessions_opened == 0


async def test_null_names_offer_every_tool_and_a_list_only_those_named():
    world = World()
    world.add(
        server(1, "crm", tool("find_contact"), tool("add_note")),
        server(2, "weather", tool("forecast", "Tomorrow's weather."), tool("alerts")),
    )
    offered = await offers(world, agent((1, None), (2, ("forecast", "gone"))))
    assert names(offered) == ["crm__add_note", "crm__find_contact", "weather__forecast"]
    forecast = offered[2].spec
    assert forecast.description == "Tomorrow's weather."
    assert forecast.parameters == {"type": "object", "properties": {}}
    assert all(offer.listed for offer in offered)
    assert world.servers.lists == 1


async def test_disabled_unknown_and_foreign_servers_offer_nothing_but_an_error_status_does():
    world = World()
    world.add(
        server(1, "off", tool("a"), enabled=False),
        server(2, "broken", tool("kept"), status="error", error="Timed out"),
        server(3, "other", tool("b"), org_id="org_b"),
    )
    offered = await offers(world, agent((1, None), (2, None), (3, None), (4, None)))
    assert names(offered) == ["broken__kept"]
    assert await world.tools().offer(CALLER, agent((1, None), (3, None))) is None


async def test_names_are_cleaned_and_cut_and_a_collision_keeps_the_first_by_name():
    world = World()
    long_server = "s" * 60
    world.add(
        server(1, "api", tool("get.user"), tool("get/user"), tool("ok")),
        server(2, long_server, tool("abcdef"), tool("abcxyz")),
        server(3, "x" * 62, tool("lost")),
    )
    offered = await offers(world, agent((1, None), (2, None), (3, None)))
    assert names(offered) == ["api__get_user", "api__ok", f"{long_server}__ab"]
    assert all(len(name) <= 64 for name in names(offered))
    run = offered[0]
    await run.execute({}, ToolContext(caller=CALLER, agent=agent((1, None))))
    assert world.connector.calls[0][1].name == "get.user"


async def test_an_input_schema_without_an_object_type_is_made_one():
    world = World()
    world.add(
        server(
            1,
            "api",
            tool("bare", schema={"properties": {"q": {"type": "string"}}}),
            tool("odd", schema={"type": "string"}),
        )
    )
    offered = await offers(world, agent((1, None)))
    assert [o.spec.parameters for o in offered] == [
        {"type": "object", "properties": {"q": {"type": "string"}}},
        {"type": "object", "properties": {}},
    ]


async def test_past_the_limit_find_tools_is_offered_and_what_it_finds_becomes_callable():
    world = World()
    world.add(
        server(
            1,
            "files",
            tool("list_files", "List the files of a folder."),
            tool("read_file", "Read one file's text."),
            tool("delete_file", "Delete a file."),
        ),
        server(2, "weather", tool("forecast", "The weather forecast for a city.")),
    )
    the_agent = agent((1, None), (2, None))
    toolbox = await ToolRegistry([world.tools(max_offered=2)]).offer(CALLER, the_agent)
    assert [s.name for s in toolbox.specs] == [FIND_TOOLS]

    context = ToolContext(caller=CALLER, agent=the_agent)
    found = await toolbox.execute(
        ToolCall(id="c1", name=FIND_TOOLS, arguments={"query": "read the files"}), context
    )
    assert [t["name"] for t in found["tools"]] == ["files__read_file", "files__list_files"]
    assert [s.name for s in toolbox.specs] == [
        FIND_TOOLS,
        "files__list_files",
        "files__read_file",
    ]

    # An allowed tool not found yet runs when called by its exact name.
    await toolbox.execute(ToolCall(id="c2", name="weather__forecast", arguments={}), context)
    assert world.connector.calls[-1][1].name == "forecast"


async def test_find_tools_is_deterministic_bounded_and_refuses_an_empty_query():
    world = World()
    world.add(server(1, "many", *(tool(f"report_{i:02}", "Make a report.") for i in range(30))))
    the_agent = agent((1, None))
    offered = await offers(world, the_agent, max_offered=5)
    finder = offered[0]
    assert finder.spec.name == FIND_TOOLS and not any(o.listed for o in offered[1:])
    context = ToolContext(caller=CALLER, agent=the_agent)
    first = await finder.execute({"query": "reports"}, context)
    again = await finder.execute({"query": "reports"}, context)
    assert first == again
    assert [t["name"] for t in first["tools"]] == [f"many__report_{i:02}" for i in range(5)]
    nothing = await finder.execute({"query": "zebra"}, context)
    assert nothing["tools"] == [] and nothing["note"]
    with pytest.raises(ToolFailed):
        await finder.execute({"query": "  "}, context)


# Calling


def a_call_world(**server_changes: Any) -> tuple[World, Agent]:
    world = World()
    world.add(server(1, "crm", tool("find_contact"), **server_changes))
    return world, agent((1, None))


async def call(world: World, the_agent: Agent, arguments: dict[str, Any] | None = None) -> Any:
    (offer,) = await offers(world, the_agent)
    context = ToolContext(caller=CALLER, agent=the_agent, thread_id="thread-1")
    return await offer.execute(arguments or {"name": "Ada"}, context)


async def test_a_call_decrypts_the_headers_and_returns_the_content():
    world, the_agent = a_call_world(header_names=("Authorization",))
    world.servers.sealed[1] = Box().seal(json.dumps({"Authorization": "Bearer s3cret"}).encode())
    world.connector.output = ToolOutput(
        content=[
            {"type": "text", "text": "Ada Lovelace"},
            {"type": "image", "mediaType": "image/png", "url": "data:image/png;base64,AAAA"},
        ],
        structured={"id": 1},
    )
    result = await call(world, the_agent)
    assert result == {
        "content": [
            {"type": "text", "text": "Ada Lovelace"},
            {"type": "image", "mediaType": "image/png", "url": "data:image/png;base64,AAAA"},
        ],
        "structured": {"id": 1},
    }
    endpoint, definition, arguments = world.connector.calls[0]
    assert endpoint == ToolEndpoint(
        kind="mcp", url="http://127.0.0.1:9/crm", headers={"Authorization": "Bearer s3cret"}
    )
    assert definition.name == "find_contact" and arguments == {"name": "Ada"}


async def test_headers_are_read_at_call_time():
    world, the_agent = a_call_world()
    (offer,) = await offers(world, the_agent)
    world.servers.sealed[1] = Box().seal(b'{"X-Key": "new"}')
    await offer.execute({}, ToolContext(caller=CALLER, agent=the_agent))
    assert world.connector.calls[0][0].headers == {"X-Key": "new"}


async def test_headers_that_do_not_open_fail_the_call_without_calling():
    world, the_agent = a_call_world()
    world.servers.sealed[1] = b"tampered"
    with pytest.raises(ToolFailed, match="header values cannot be read"):
        await call(world, the_agent)
    assert world.connector.calls == []


async def test_an_unreachable_server_is_a_tool_failure():
    world, the_agent = a_call_world()
    world.connector.failure = ToolServerUnreachable("The tool server did not answer in time.")
    with pytest.raises(ToolFailed, match="did not answer in time"):
        await call(world, the_agent)


async def test_a_tool_error_is_a_tool_failure_with_its_text():
    world, the_agent = a_call_world()
    world.connector.output = ToolOutput(
        content=[{"type": "text", "text": "No such contact."}], is_error=True
    )
    with pytest.raises(ToolFailed, match="No such contact"):
        await call(world, the_agent)


@pytest.mark.parametrize("change", [{"enabled": False}, None])
async def test_a_server_deleted_or_disabled_since_the_offer_is_no_longer_available(change):
    world, the_agent = a_call_world()
    (offer,) = await offers(world, the_agent)
    if change is None:
        del world.servers.servers[1]
    else:
        world.servers.servers[1] = replace(world.servers.servers[1], **change)
    with pytest.raises(ToolFailed) as failure:
        await offer.execute({}, ToolContext(caller=CALLER, agent=the_agent))
    assert failure.value.message == NO_LONGER_AVAILABLE
    assert world.connector.calls == []


async def test_a_tool_needing_approval_waits_for_it_and_runs_once_approved():
    world, the_agent = a_call_world(require_approval=("find_contact",))
    with pytest.raises(ToolApprovalRequired):
        await call(world, the_agent)
    assert world.connector.calls == [] and world.audit.of("org_a") == []
    (offer,) = await offers(world, the_agent)
    context = ToolContext(caller=CALLER, agent=the_agent, thread_id="t", approved=True)
    await offer.execute({"name": "Ada"}, context)
    assert len(world.connector.calls) == 1 and len(world.audit.of("org_a")) == 1


async def test_a_long_text_result_is_cut_with_a_note():
    world, the_agent = a_call_world()
    world.connector.output = ToolOutput(
        content=[{"type": "text", "text": "a" * 40_000}, {"type": "text", "text": "b"}]
    )
    result = await call(world, the_agent)
    texts = [part["text"] for part in result["content"]]
    assert len(texts[0]) == 32_000
    assert texts[-1].startswith("[Only the first 32000 of 40001 characters")


async def test_a_large_structured_result_and_an_svg_image_are_not_kept():
    world, the_agent = a_call_world()
    svg = {"type": "image", "mediaType": "image/svg+xml", "url": "data:image/svg+xml;base64,PA=="}
    png = {"type": "image", "mediaType": "image/png", "url": "data:image/png;base64,iVBO"}
    world.connector.output = ToolOutput(content=[svg, png], structured={"rows": ["r" * 40_000]})
    result = await call(world, the_agent)
    assert "structured" not in result
    assert result["content"][0] == {"type": "text", "text": "[An image of type image/svg+xml]"}
    assert result["content"][1] == png
    assert result["content"][2]["text"].startswith("[The structured result is over 32000")


async def test_every_call_is_audited_without_its_arguments():
    world, the_agent = a_call_world()
    await call(world, the_agent, {"secret": "do-not-log"})
    world.connector.failure = ToolServerUnreachable("Refused.")
    with pytest.raises(ToolFailed):
        await call(world, the_agent)
    entries = world.audit.of("org_a")
    assert [e.action for e in entries] == [TOOL_CALLED, TOOL_CALLED]
    ok, failed = entries
    assert (ok.target_type, ok.target_id, ok.actor_user_id) == ("tool_server", "1", "user_1")
    assert {k: v for k, v in ok.details.items() if k != "durationMs"} == {
        "toolServerName": "crm",
        "tool": "find_contact",
        "agentId": 7,
        "threadId": "thread-1",
        "ok": True,
        "outcome": "ok",
    }
    assert isinstance(ok.details["durationMs"], int)
    assert (failed.details["ok"], failed.details["outcome"]) == (False, "unreachable")
    assert "do-not-log" not in json.dumps([e.details for e in entries])
    assert world.uow.commits == 2


async def test_an_audit_log_that_cannot_be_written_does_not_fail_the_call():
    world, the_agent = a_call_world()

    async def broken(entry: Any) -> None:
        raise RuntimeError("database down")

    world.audit.record = broken  # type: ignore[method-assign]
    assert await call(world, the_agent) == {"content": []}
