from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

DEFAULT_MAX_OUTPUT_TOKENS = 1024


class ChatModelError(Exception):
    """A model call failed; `message` is safe to show to the member (no URL, key or trace)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ChatModelUnavailable(ChatModelError):
    """The model named is not served by this deployment (unknown provider or local model)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool the model may call: a name, what it does, and a JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A call the model asked for; `arguments` is the parsed JSON object it sent."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatTurn:
    """One message of the prompt. An assistant turn may carry tool calls; a `tool` turn answers
    one of them (`tool_call_id`) with `content`."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRequest:
    """A prompt for one model call. `model` is the model's name at its provider (no prefix).

    `max_output_tokens` None leaves the answer's length to the model's own limit.
    `tool_choice` is the provider's default when None; otherwise `auto`, `none`, `required`
    (some tool must be called) or the name of one of `tools` that must be called.
    `response_schema`, a JSON Schema, asks for an answer that is one JSON object matching it
    (constrained decoding where the model supports it; the caller still validates)."""

    model: str
    turns: Sequence[ChatTurn]
    tools: Sequence[ToolSpec] = ()
    max_output_tokens: int | None = DEFAULT_MAX_OUTPUT_TOKENS
    temperature: float | None = None
    tool_choice: str | None = None
    response_schema: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    """The next piece of the answer's text."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallRequested:
    """The model asks for a tool call; emitted once the call's arguments are complete."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens the call consumed, as the provider counted them."""

    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class Finished:
    """The call ended: `stop`, `length` (output limit reached) or `tool-calls`."""

    reason: str


ChatEvent = TextDelta | ToolCallRequested | Usage | Finished


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatModelInfo:
    """What a model can do."""

    supports_tools: bool
    context_tokens: int = field(default=8192)


class ChatModel(Protocol):
    """A chat model that streams its answer.

    `stream` yields `TextDelta`s and `ToolCallRequested`s as they come, then `Usage` (when the
    provider reports it) and finally one `Finished`. A failure (unreachable, timed out, refused,
    an answer that cannot be read) raises `ChatModelError` from the iteration, after whatever
    was already yielded. Closing the iterator early (`aclose`) stops the generation and frees
    what it holds: the consumer does that to cancel.
    """

    @property
    def info(self) -> ChatModelInfo:
        """The model's capabilities."""
        ...

    def stream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        """Start the call and yield its events."""
        ...


class ChatModelRegistry(Protocol):
    """Chooses the chat model for a `provider:model` reference (`local:smollm2-135m`,
    `openai:<any model>`)."""

    def get(self, model: str) -> ChatModel:
        """The model; `ChatModelUnavailable` when this deployment cannot serve it."""
        ...


@dataclass(slots=True)
class CallRecord:
    """What one metered model call produced; the caller fills it in as the answer comes."""

    text: list[str] = field(default_factory=list)
    usage: Usage | None = None


class CallMeter(Protocol):
    """Meters the model calls an adapter makes on someone's behalf (an organization's spend).

    `metered(request, context_tokens)` is entered right before `request` is sent: it admits the
    call or raises (a spend cap reached); on exit it charges what the record says the call
    produced, whatever the outcome.
    """

    def metered(
        self, request: ChatRequest, context_tokens: int
    ) -> AbstractAsyncContextManager[CallRecord]:
        """The call's record, to fill while it runs."""
        ...
