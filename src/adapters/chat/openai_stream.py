"""Reading an OpenAI-compatible chat answer: server-sent-event lines into `ChatEvent`s, and the
tool calls that arrive in fragments (keyed by `index`) assembled whole, their arguments parsed,
once the model finishes.

This is the streaming hot path: plain functions over bytes and dicts, msgspec to decode, no
per-chunk objects beyond the events themselves.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import msgspec

from adapters.openai_gateway.gateway import OpenAIGateway
from application.ports.chat_model import (
    ChatEvent,
    ChatModelError,
    Finished,
    TextDelta,
    ToolCall,
    ToolCallRequested,
    Usage,
)

FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    # The port knows three endings; a filtered answer simply stopped early.
    "content_filter": "stop",
}
UNREADABLE = "The model provider sent an answer that could not be read."


def line_events(
    lines: list[bytes], answer: Answer, gateway: OpenAIGateway
) -> Iterator[ChatEvent | None]:
    """The events of complete server-sent-event lines, one by one, so that what came before an
    unreadable line is delivered; `None` marks `data: [DONE]`."""
    for line in lines:
        if not line.startswith(b"data:"):
            # Blank separators, `: keep-alive` comments, `event:` and `id:` fields.
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            yield None
            return
        try:
            chunk = msgspec.json.decode(data)
        except msgspec.DecodeError:
            raise ChatModelError(UNREADABLE) from None
        yield from chunk_events(chunk, answer, gateway)


def chunk_events(chunk: object, answer: Answer, gateway: OpenAIGateway) -> list[ChatEvent]:
    """The events of one decoded chunk (`chat.completion.chunk`, or a whole answer whose
    choices' `message` was put in their `delta`)."""
    if not isinstance(chunk, dict):
        raise ChatModelError(UNREADABLE)
    error = chunk.get("error")
    if error is not None:
        message = gateway.error_in({"error": error}).message
        detail = f": {message}" if message else "."
        raise ChatModelError(f"The model provider failed while answering{detail}")
    answer.take_usage(chunk.get("usage"))
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        if "usage" in chunk:
            return []
        raise ChatModelError(UNREADABLE)
    events: list[ChatEvent] = []
    for choice in choices:
        if not isinstance(choice, dict):
            raise ChatModelError(UNREADABLE)
        if choice.get("index", 0) != 0:
            continue
        delta = choice.get("delta")
        if isinstance(delta, dict):
            content = delta.get("content")
            if isinstance(content, str) and content:
                events.append(TextDelta(content))
            tool_calls = delta.get("tool_calls")
            if tool_calls:
                answer.take_tool_calls(tool_calls)
        elif delta is not None:
            raise ChatModelError(UNREADABLE)
        reason = choice.get("finish_reason")
        if reason:
            events.extend(answer.finish_with(str(reason)))
    return events


def whole_answer_events(body: object, gateway: OpenAIGateway) -> list[ChatEvent]:
    """The events of an answer sent as one JSON document (a server that ignores `stream`)."""
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
        raise ChatModelError(UNREADABLE)
    streamed = {
        **body,
        "choices": [
            {**choice, "delta": choice.get("message")} if isinstance(choice, dict) else choice
            for choice in body["choices"]
        ],
    }
    answer = Answer()
    events = chunk_events(streamed, answer, gateway)
    if answer.finish is None:
        events.extend(answer.finish_with("stop"))
    events.extend(answer.ending())
    return events


@dataclass(slots=True)
class PendingCall:
    """A tool call whose fragments are still arriving."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class Answer:
    """What one streamed answer has said so far, beyond its text."""

    __slots__ = ("calls", "emitted", "finish", "usage")

    def __init__(self) -> None:
        self.calls: dict[int, PendingCall] = {}
        self.emitted = False
        self.finish: str | None = None
        self.usage: Usage | None = None

    def take_usage(self, usage: object) -> None:
        if not isinstance(usage, dict):
            return
        prompt = _count(usage.get("prompt_tokens"))
        completion = _count(usage.get("completion_tokens"))
        if prompt is not None and completion is not None:
            self.usage = Usage(input_tokens=prompt, output_tokens=completion)

    def take_tool_calls(self, fragments: object) -> None:
        if not isinstance(fragments, list):
            raise ChatModelError(UNREADABLE)
        for fragment in fragments:
            if not isinstance(fragment, dict):
                raise ChatModelError(UNREADABLE)
            index = _count(fragment.get("index"))
            if index is None:
                # A server that sends each call whole may leave out its index.
                index = len(self.calls)
            call = self.calls.setdefault(index, PendingCall())
            if isinstance(fragment.get("id"), str) and not call.id:
                call.id = fragment["id"]
            function = fragment.get("function") or {}
            if not isinstance(function, dict):
                raise ChatModelError(UNREADABLE)
            name = function.get("name")
            # Some servers repeat the name in every fragment; it is never split.
            if isinstance(name, str) and name and not call.name:
                call.name = name
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                call.arguments.append(arguments)
            elif isinstance(arguments, dict):
                call.arguments.append(json.dumps(arguments))

    def finish_with(self, reason: str) -> list[ChatEvent]:
        """The tool calls, complete now that the model stopped; records why it stopped."""
        self.finish = FINISH_REASONS.get(reason, "stop")
        if not self.calls or self.emitted:
            return []
        self.emitted = True
        if self.finish == "stop":
            self.finish = "tool-calls"
        return [
            ToolCallRequested(_parsed(index, call)) for index, call in sorted(self.calls.items())
        ]

    def ending(self) -> list[ChatEvent]:
        events: list[ChatEvent] = []
        if self.finish is None:
            events.extend(self.finish_with("stop"))
        if self.usage is not None:
            events.append(self.usage)
        events.append(Finished(self.finish or "stop"))
        return events


def _parsed(index: int, call: PendingCall) -> ToolCall:
    if not call.name:
        raise ChatModelError("The model asked for a tool call without naming the tool.")
    raw = "".join(call.arguments).strip() or "{}"
    try:
        arguments = json.loads(raw)
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        raise ChatModelError(
            f"The model asked for tool '{call.name}' with arguments that are not a JSON object."
        )
    return ToolCall(
        id=call.id or f"call_{index}_{uuid.uuid4().hex[:12]}", name=call.name, arguments=arguments
    )


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None
