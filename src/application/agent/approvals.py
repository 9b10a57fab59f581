"""An answer that continues once the member has decided on the tool calls it asked approval
for (`domain.tool_approvals`): the decided calls are made or denied, then the model goes on
from the message's parts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from application.agent.progress import Progress
from application.agent.tool_calls import make_call, result_for_model
from application.ports.agent_tool import ToolApprovalRequired, ToolContext
from application.ports.chat_model import ChatTurn, ToolCall
from application.tools.registry import Toolbox
from domain import chat_stream
from domain.agents import Agent
from domain.identity import Caller
from domain.tool_approvals import (
    EXPIRED_REASON,
    TOOL_INVOCATION,
    TOOL_RESULT,
    denied_result_part,
    denied_text,
    settle,
)


async def decide_calls(
    toolbox: Toolbox,
    caller: Caller,
    agent: Agent,
    progress: Progress,
    *,
    thread_id: str | None,
) -> int:
    """Stream a `tool-approval-response` for every call of the message (`progress.parts`) that
    waited for approval, a call without a decision counting as denied for having expired; then
    make each approved call (its result streamed and stored as any call's) and give each denied
    one `tool-output-denied`. Returns the step the answer goes on at: the one after the step
    that asked."""
    calls = settle(progress.parts, EXPIRED_REASON)
    for _, decision in calls:
        progress.emit(
            chat_stream.tool_approval_response(
                decision.approval_id, decision.approved, decision.reason
            )
        )
    for call, decision in calls:
        refusal = denied_text(decision.reason)
        if decision.approved:
            tool_call = ToolCall(
                id=call.tool_call_id, name=call.tool_name, arguments=call.arguments
            )
            context = ToolContext(caller=caller, agent=agent, thread_id=thread_id, approved=True)
            try:
                await make_call(toolbox, tool_call, context, progress)
                continue
            except ToolApprovalRequired:
                # Only a tool that ignores `approved` gets here: it is not made without it.
                refusal = denied_text(None)
        progress.emit(chat_stream.tool_output_denied(call.tool_call_id))
        progress.parts.append(denied_result_part(call, refusal))
    return max((call.step for call, _ in calls), default=-1) + 1


def message_turns(parts: Sequence[dict[str, Any]]) -> list[ChatTurn]:
    """An answer's parts so far as the model's turns: each step's text and tool calls as an
    assistant turn, then a `tool` turn per result. A call without a result is left out, since
    a model's API refuses a call that has no answer."""
    turns: list[ChatTurn] = []
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: dict[str, ChatTurn] = {}

    def end_step() -> None:
        text = "".join(texts).strip()
        answered = tuple(call for call in calls if call.id in results)
        if answered:
            turns.append(ChatTurn(role="assistant", content=text, tool_calls=answered))
            turns.extend(results[call.id] for call in answered)
        elif text:
            turns.append(ChatTurn(role="assistant", content=text))
        texts.clear()
        calls.clear()
        results.clear()

    for part in parts:
        kind = part.get("type")
        if kind == "text":
            if calls:
                end_step()
            texts.append(str(part.get("text", "")))
        elif kind == TOOL_INVOCATION:
            arguments = part.get("args")
            calls.append(
                ToolCall(
                    id=str(part.get("toolCallId")),
                    name=str(part.get("toolName")),
                    arguments=arguments if isinstance(arguments, dict) else {},
                )
            )
        elif kind == TOOL_RESULT:
            result = part.get("result")
            content = str(result) if part.get("isError") else result_for_model(result)
            call_id = str(part.get("toolCallId"))
            results[call_id] = ChatTurn(role="tool", tool_call_id=call_id, content=content)
    end_step()
    return turns
