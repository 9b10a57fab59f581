from __future__ import annotations

import dataclasses
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from application.agent.progress import Progress
from application.ports.agent_tool import ToolApprovalRequired, ToolContext, ToolFailed
from application.ports.chat_model import ChatTurn, ToolCall
from application.tools.registry import Toolbox
from domain import chat_stream
from domain.agents import Agent
from domain.identity import Caller
from domain.tool_approvals import approval_request_part

TOOL_RESULT_CHARS = 32_000
DATA_URL_KEPT = 256


@dataclass(frozen=True, slots=True)
class ApprovalTerms:
    """When an approval asked for now expires, and the step of the answer that asks."""

    expires_at: datetime
    step: int


async def run_tool_call(
    toolbox: Toolbox,
    call: ToolCall,
    caller: Caller,
    agent: Agent,
    progress: Progress,
    *,
    thread_id: str | None = None,
) -> ChatTurn | None:
    """Run one call the model asked for and answer it with a `tool` turn.

    The call streams as `tool-input-start`, `tool-input-available`, then (`make_call`)
    its result; both the call and its result are stored as parts. A call that waits for a
    member's approval streams nothing more and has no turn (None): the answer asks for the
    approvals (`ask_approval`) once the step's other calls are made.
    """
    progress.emit(chat_stream.tool_input_start(call.id, call.name))
    progress.emit(chat_stream.tool_input_available(call.id, call.name, call.arguments))
    progress.parts.append(
        {
            "type": "tool-invocation",
            "toolCallId": call.id,
            "toolName": call.name,
            "args": call.arguments,
        }
    )
    context = ToolContext(caller=caller, agent=agent, thread_id=thread_id)
    try:
        return await make_call(toolbox, call, context, progress)
    except ToolApprovalRequired:
        return None


def distinct_ids(calls: list[ToolCall], parts: list[dict[str, Any]]) -> list[ToolCall]:
    """The calls, each with an id no other call of the answer has: a provider that numbers its
    calls per response (or sends none) would otherwise tie a result or an approval to the
    wrong call."""
    used = {p.get("toolCallId") for p in parts if p.get("type") == "tool-invocation"}
    distinct: list[ToolCall] = []
    for call in calls:
        fresh = call
        if not call.id or call.id in used:
            fresh = dataclasses.replace(call, id=f"call_{uuid.uuid4().hex[:24]}")
        used.add(fresh.id)
        distinct.append(fresh)
    return distinct


def ask_approval(progress: Progress, call: ToolCall, terms: ApprovalTerms) -> None:
    """Stream a `tool-approval-request` for `call` and store it with its expiry and step."""
    approval_id = str(uuid.uuid4())
    progress.emit(chat_stream.tool_approval_request(approval_id, call.id))
    progress.parts.append(approval_request_part(call.id, approval_id, terms.expires_at, terms.step))


async def make_call(
    toolbox: Toolbox, call: ToolCall, context: ToolContext, progress: Progress
) -> ChatTurn:
    """Make the call and stream its result: `tool-output-available` followed by the sources it
    drew on, or `tool-output-error` when the tool refused it. The model gets the result as JSON
    (at most `TOOL_RESULT_CHARS`, a long data URL as a note) or the refusal's message.
    `ToolApprovalRequired` passes through, with nothing streamed."""
    try:
        output = await toolbox.execute(call, context)
    except ToolFailed as failure:
        progress.emit(chat_stream.tool_output_error(call.id, failure.message))
        progress.parts.append(
            {
                "type": "tool-result",
                "toolCallId": call.id,
                "toolName": call.name,
                "isError": True,
                "result": failure.message,
            }
        )
        return ChatTurn(role="tool", tool_call_id=call.id, content=failure.message)
    progress.emit(chat_stream.tool_output_available(call.id, output))
    progress.parts.append(
        {"type": "tool-result", "toolCallId": call.id, "toolName": call.name, "result": output}
    )
    progress.cite(context.sources)
    return ChatTurn(role="tool", tool_call_id=call.id, content=result_for_model(output))


def result_for_model(output: Any) -> str:
    """A tool's result as the model reads it."""
    return json.dumps(_for_model(output), ensure_ascii=False)[:TOOL_RESULT_CHARS]


def _for_model(value: Any) -> Any:
    """The result as the model reads it: a data URL (a tool server's image) stands as a short
    note, since its bytes would fill the result's characters and mean nothing as text."""
    if isinstance(value, str) and value.startswith("data:") and len(value) > DATA_URL_KEPT:
        return f"[{value[5:].partition(';')[0] or 'data'} of {len(value)} characters, not shown]"
    if isinstance(value, dict):
        return {key: _for_model(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_for_model(item) for item in value]
    return value
