from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from application.ports.agent_tool import AgentTool, ToolContext, ToolFailed, ToolOffer
from application.ports.chat_model import ToolCall, ToolSpec
from domain.agents import Agent
from domain.identity import Caller


class Toolbox:
    """The tools offered for one answer: their specs for the model, the prompt sections they
    add, and the execution of a call by the name the model used. The specs grow during the
    answer as calls reveal offers that were not listed (the loop reads them at every step)."""

    def __init__(self, offers: Sequence[ToolOffer] = ()) -> None:
        self._offers: dict[str, ToolOffer] = {}
        self._revealed: set[str] = set()
        for offer in offers:
            if offer.spec.name in self._offers:
                raise ValueError(f"Two tools are named {offer.spec.name!r}.")
            self._offers[offer.spec.name] = offer

    @property
    def specs(self) -> list[ToolSpec]:
        return [
            offer.spec
            for name, offer in self._offers.items()
            if offer.listed or name in self._revealed
        ]

    @property
    def instructions(self) -> list[str]:
        return [offer.instructions for offer in self._offers.values() if offer.instructions]

    def reveal(self, names: Iterable[str]) -> None:
        """Offer these of the answer's unlisted tools from now on (an answer continued after
        approvals keeps what its first run found)."""
        self._revealed.update(name for name in names if name in self._offers)

    async def execute(self, call: ToolCall, context: ToolContext) -> Any:
        """The call's result; `ToolFailed` when no tool of that name was offered."""
        offer = self._offers.get(call.name)
        if offer is None:
            raise ToolFailed(f"There is no tool named {call.name!r}.")
        output = await offer.execute(call.arguments, context)
        self.reveal(context.revealed)
        return output


class ToolRegistry:
    """The tools of the agent loop, in the order they are offered to a model.

    The loop asks it, once per answer, for the `Toolbox` of the agent answering; each tool
    may decline for that agent. A new tool is registered here (in the wiring) and the loop
    offers it, streams its calls and stores their results like any other.
    """

    def __init__(self, tools: Sequence[AgentTool] = ()) -> None:
        self._tools = tuple(tools)

    async def offer(self, caller: Caller, agent: Agent) -> Toolbox:
        offers: list[ToolOffer] = []
        for tool in self._tools:
            offered = await tool.offer(caller, agent)
            if isinstance(offered, ToolOffer):
                offers.append(offered)
            elif offered is not None:
                offers.extend(offered)
        return Toolbox(offers)
