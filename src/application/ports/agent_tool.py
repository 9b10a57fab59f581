from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from application.ports.chat_model import ToolSpec
from domain.agents import Agent
from domain.chunks import SearchResult
from domain.identity import Caller


class ToolFailed(Exception):
    """A tool call could not be done; `message` goes back to the model as the call's result and
    to the member as a `tool-output-error`, so it says what was wrong and holds no secret."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ToolApprovalRequired(Exception):
    """The call waits for a member's approval (its server's `requireApproval` names it) and was
    not made; the answer asks for the decision and pauses."""


@dataclass(slots=True, kw_only=True)
class ToolContext:
    """The answer a tool call serves: who asked, which agent answers and in which conversation
    (`thread_id`, None outside one). A tool that draws on knowledge-base passages reports them
    with `cite`; they become the answer's sources (`source-document` chunks) once the call's
    result is out, unless the call fails. A tool that finds other tools reports their names
    with `reveal`; once its call succeeds, those of the answer's offers that were not listed
    are offered to the model's next steps. `approved`: the member approved this very call, so a
    tool that needs approval makes it instead of raising `ToolApprovalRequired`."""

    caller: Caller
    agent: Agent
    thread_id: str | None = None
    approved: bool = False
    sources: list[SearchResult] = field(default_factory=list)
    revealed: list[str] = field(default_factory=list)

    def cite(self, passages: Sequence[SearchResult]) -> None:
        self.sources.extend(passages)

    def reveal(self, names: Sequence[str]) -> None:
        self.revealed.extend(names)


ToolExecutor = Callable[[dict[str, Any], ToolContext], Awaitable[Any]]
"""Runs one call: the model's parsed arguments and the answer's context in, the result out (any
JSON-serialisable value, shown to the member as is). Raises `ToolFailed` for a call it
refuses (bad arguments, nothing by that name) and `ToolApprovalRequired` for one that waits for
a member's approval; any other exception fails the whole answer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOffer:
    """A tool as offered for one answer: the name and JSON Schema the model sees, the executor
    of its calls and, when the model should know more than the description says, a section
    of the system prompt (`instructions`). An offer that is not `listed` is left out of the
    model's tools until a call reveals it (`ToolContext.reveal`), which keeps a long list of
    tools out of the model's context; a call by its exact name runs all the same."""

    spec: ToolSpec
    execute: ToolExecutor
    instructions: str = ""
    listed: bool = True


class AgentTool(Protocol):
    """A tool the agent loop may give a model that takes tools.

    Asked once per answer, before the first model call, whether and how it is offered to
    the agent answering; it declines (None) when it has nothing to offer that agent (no
    knowledge base to search, no active skill to load), and may offer several tools at once (a
    tool server's). What it learnt while offering (the skills it listed) is the offer's to
    keep: calls made during that answer go to the offer's executor. Names are unique among the
    tools offered together.
    """

    async def offer(self, caller: Caller, agent: Agent) -> ToolOffer | Sequence[ToolOffer] | None:
        """This tool (or these tools) as offered to `agent` answering `caller`, or None when it
        does not apply."""
        ...
