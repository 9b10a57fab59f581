"""`ToolRegistry` and `Toolbox`: what is offered to which agent, and calls run by name."""

from __future__ import annotations

from typing import Any

import pytest

from application.ports.agent_tool import ToolContext, ToolFailed, ToolOffer
from application.ports.chat_model import ToolCall, ToolSpec
from application.tools.registry import Toolbox, ToolRegistry
from domain.agents import Agent
from domain.identity import Caller
from tests.fakes.agents import an_agent as agent

CALLER = Caller(user_id="user_1", org_id="org_a")


class EchoTool:
    """Offered to the agents `wanted` says yes to; answers a call with its name and arguments."""

    def __init__(self, name: str, wanted=lambda agent: True, instructions: str = "") -> None:
        self.name = name
        self.wanted = wanted
        self.instructions = instructions
        self.offered_to: list[tuple[Caller, int]] = []
        self.runs: list[tuple[dict[str, Any], ToolContext]] = []

    async def offer(self, caller: Caller, the_agent: Agent) -> ToolOffer | None:
        self.offered_to.append((caller, the_agent.id))
        if not self.wanted(the_agent):
            return None
        spec = ToolSpec(name=self.name, description=f"The {self.name} tool.", parameters={})
        return ToolOffer(spec=spec, execute=self.execute, instructions=self.instructions)

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.runs.append((arguments, context))
        return {"tool": self.name, "arguments": arguments}


def context(the_agent: Agent | None = None) -> ToolContext:
    return ToolContext(caller=CALLER, agent=the_agent or agent())


async def test_each_tool_is_asked_and_the_ones_that_apply_are_offered_in_order():
    first = EchoTool("first", instructions="Use first first.")
    picky = EchoTool("picky", wanted=lambda a: bool(a.knowledge_base_ids))
    last = EchoTool("last")
    registry = ToolRegistry([first, picky, last])

    plain = await registry.offer(CALLER, agent())
    assert [s.name for s in plain.specs] == ["first", "last"]
    assert plain.instructions == ["Use first first."]

    with_kb = await registry.offer(CALLER, agent(knowledge_base_ids=[1]))
    assert [s.name for s in with_kb.specs] == ["first", "picky", "last"]
    assert picky.offered_to == [(CALLER, 7), (CALLER, 7)]


async def test_a_call_runs_the_offered_tool_of_that_name_with_the_context():
    one, two = EchoTool("one"), EchoTool("two")
    toolbox = await ToolRegistry([one, two]).offer(CALLER, agent())
    ctx = context()
    result = await toolbox.execute(ToolCall(id="c1", name="two", arguments={"x": 1}), ctx)
    assert result == {"tool": "two", "arguments": {"x": 1}}
    assert two.runs == [({"x": 1}, ctx)]
    assert one.runs == []


async def test_an_unknown_or_declined_tool_is_refused_with_the_message_the_model_sees():
    declined = EchoTool("declined", wanted=lambda a: False)
    toolbox = await ToolRegistry([declined]).offer(CALLER, agent())
    for name in ("delete_everything", "declined"):
        with pytest.raises(ToolFailed) as refused:
            await toolbox.execute(ToolCall(id="c1", name=name, arguments={}), context())
        assert refused.value.message == f"There is no tool named {name!r}."
    assert declined.runs == []


async def test_an_empty_registry_offers_nothing():
    toolbox = await ToolRegistry().offer(CALLER, agent())
    assert (toolbox.specs, toolbox.instructions) == ([], [])
    assert Toolbox().specs == []


async def test_two_tools_offered_under_one_name_are_a_mistake():
    registry = ToolRegistry([EchoTool("same"), EchoTool("same")])
    with pytest.raises(ValueError, match="same"):
        await registry.offer(CALLER, agent())
