"""An agent's `tools`: the rules of the field (`parse_tool_grants`) and, in the use cases, that
every tool server named is one of the organization's."""

from __future__ import annotations

from typing import Any

import pytest

from application.use_cases.create_agent import CreateAgent, CreateAgentCommand
from application.use_cases.update_agent import UpdateAgent, UpdateAgentCommand
from domain.agents import AgentFields, parse_tool_grants
from domain.errors import Invalid
from domain.identity import ADMIN_ROLE, Caller
from domain.tool_servers import TOOL_SERVER_ID_REQUIRED, UNKNOWN_TOOL_SERVERS, ToolGrant
from tests.fakes import FakeKnowledgeBases, FakeUnitOfWork
from tests.fakes.agents import FakeAgents
from tests.fakes.skills import FakeSkillRepository
from tests.unit.test_server_tools import Servers, server, tool

ADMIN = Caller(user_id="user_1", org_id="org_a", role=ADMIN_ROLE)


def test_null_and_an_empty_list_grant_nothing():
    assert parse_tool_grants(None) == ()
    assert parse_tool_grants([]) == ()
    assert AgentFields.parse(name="A").tools == ()


def test_grants_keep_their_order_and_null_or_absent_names_mean_all():
    grants = parse_tool_grants(
        [
            {"toolServerId": 3, "names": ["b", "a"]},
            {"toolServerId": 1, "names": None},
            {"toolServerId": 2},
        ]
    )
    assert grants == (
        ToolGrant(tool_server_id=3, names=("b", "a")),
        ToolGrant(tool_server_id=1, names=None),
        ToolGrant(tool_server_id=2, names=None),
    )


@pytest.mark.parametrize(
    ("value", "message", "field"),
    [
        ("all", "tools must be a list of {toolServerId, names} objects", "tools"),
        ([1], "tools must be a list of {toolServerId, names} objects", "tools[0]"),
        (
            [{"toolServerId": i} for i in range(1, 52)],
            "tools may name at most 50 tool servers",
            "tools",
        ),
        ([{}], TOOL_SERVER_ID_REQUIRED, "tools[0].toolServerId"),
        ([{"toolServerId": 0}], TOOL_SERVER_ID_REQUIRED, None),
        ([{"toolServerId": "3"}], TOOL_SERVER_ID_REQUIRED, "tools[0].toolServerId"),
        ([{"toolServerId": True}], TOOL_SERVER_ID_REQUIRED, "tools[0].toolServerId"),
        ([{"toolServerId": 2**63}], TOOL_SERVER_ID_REQUIRED, None),
        (
            [{"toolServerId": 1}, {"toolServerId": 1, "names": ["a"]}],
            "tools names tool server 1 more than once",
            "tools[1].toolServerId",
        ),
        ([{"toolServerId": 1, "extra": 1}], "tools[0] has unknown fields: extra", "tools[0]"),
        (
            [{"toolServerId": 1, "names": "a"}],
            "tools[0].names must be null or a list of tool names",
            "tools[0].names",
        ),
        (
            [{"toolServerId": 1, "names": [str(i) for i in range(501)]}],
            "tools[0].names may hold at most 500 tool names",
            "tools[0].names",
        ),
        (
            [{"toolServerId": 1, "names": [""]}],
            "tools[0].names must hold tool names of 1 to 128 characters",
            "tools[0].names",
        ),
        (
            [{"toolServerId": 1, "names": ["x" * 129]}],
            "tools[0].names must hold tool names of 1 to 128 characters",
            "tools[0].names",
        ),
        (
            [{"toolServerId": 1, "names": [7]}],
            "tools[0].names must hold tool names of 1 to 128 characters",
            "tools[0].names",
        ),
        (
            [{"toolServerId": 1, "names": ["a", "a"]}],
            "tools[0].names names a tool more than once",
            "tools[0].names",
        ),
    ],
)
def test_bad_shapes_are_refused_with_a_message_naming_the_field(
    value: Any, message: str, field: str | None
):
    with pytest.raises(Invalid) as refused:
        parse_tool_grants(value)
    assert refused.value.message == message
    if field is not None:
        assert refused.value.details[0]["field"] == field


class World:
    def __init__(self) -> None:
        self.agents = FakeAgents()
        self.servers = Servers()
        self.servers.servers[1] = server(1, "crm", tool("a"))
        self.servers.servers[2] = server(2, "theirs", tool("b"), org_id="org_b")
        self.uow = FakeUnitOfWork()

    def create(self) -> CreateAgent:
        return CreateAgent(
            self.agents, FakeKnowledgeBases(), FakeSkillRepository(), self.uow,
            tool_servers=self.servers,
        )  # fmt: skip

    def update(self) -> UpdateAgent:
        return UpdateAgent(
            self.agents, FakeKnowledgeBases(), FakeSkillRepository(), self.uow,
            tool_servers=self.servers,
        )  # fmt: skip


async def test_an_agent_is_created_and_changed_with_its_organizations_servers():
    world = World()
    created = await world.create().execute(
        CreateAgentCommand.parse(
            caller=ADMIN, name="A", tools=[{"toolServerId": 1, "names": ["a"]}]
        )
    )
    assert created.tools == (ToolGrant(tool_server_id=1, names=("a",)),)
    changed = await world.update().execute(
        UpdateAgentCommand.parse(
            caller=ADMIN, agent_id=created.id, tools=[{"toolServerId": 1, "names": None}]
        )
    )
    assert changed.tools == (ToolGrant(tool_server_id=1, names=None),)
    kept = await world.update().execute(
        UpdateAgentCommand.parse(caller=ADMIN, agent_id=created.id, name="B")
    )
    assert kept.tools == changed.tools
    cleared = await world.update().execute(
        UpdateAgentCommand.parse(caller=ADMIN, agent_id=created.id, tools=None)
    )
    assert cleared.tools == ()


@pytest.mark.parametrize("server_id", [2, 99])
async def test_a_foreign_or_unknown_server_is_refused(server_id: int):
    world = World()
    grants = [{"toolServerId": 1}, {"toolServerId": server_id}]
    with pytest.raises(Invalid) as refused:
        await world.create().execute(CreateAgentCommand.parse(caller=ADMIN, name="A", tools=grants))
    assert refused.value.message == UNKNOWN_TOOL_SERVERS
    assert refused.value.details == [
        {"field": "tools", "message": f"tool server {server_id} not found"}
    ]
    assert world.agents.rows == {} and world.uow.commits == 0

    created = await world.create().execute(CreateAgentCommand.parse(caller=ADMIN, name="A"))
    with pytest.raises(Invalid, match=UNKNOWN_TOOL_SERVERS):
        await world.update().execute(
            UpdateAgentCommand.parse(caller=ADMIN, agent_id=created.id, tools=grants)
        )


async def test_without_a_tool_server_repository_no_server_is_known():
    agents, uow = FakeAgents(), FakeUnitOfWork()
    create = CreateAgent(agents, FakeKnowledgeBases(), FakeSkillRepository(), uow)
    with pytest.raises(Invalid, match=UNKNOWN_TOOL_SERVERS):
        await create.execute(
            CreateAgentCommand.parse(caller=ADMIN, name="A", tools=[{"toolServerId": 1}])
        )
