"""Approval of tool calls (`CONTRACT.md`, "Tools"): a call of a tool its server's
`requireApproval` names is not made until the conversation's member approves it.

The state lives in the assistant message's parts, next to the call it is about: the call's
`tool-invocation`, then a `tool-approval-request` part (`approvalId`, `expiresAt` and the
`step` of the answer that asked), later a `tool-approval-response` part (`approved`,
`reason`), and once the call is made or denied its `tool-result` (`denied: true` for a denied
one). An approval is pending while it has no response; past `expiresAt` it counts as denied.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from domain.errors import Invalid, field_error

DEFAULT_APPROVAL_TTL = 86_400.0
"""Seconds a call waits for a decision (`AP_TOOL_APPROVAL_TTL`)."""
REASON_CHARS = 1000

APPROVAL_REQUEST = "tool-approval-request"
APPROVAL_RESPONSE = "tool-approval-response"
TOOL_INVOCATION = "tool-invocation"
TOOL_RESULT = "tool-result"

APPROVAL_NOT_FOUND = "Approval not found"
APPROVAL_ANSWERED = "This approval was already answered"
APPROVAL_EXPIRED = "This approval expired; the call counts as denied"
APPROVAL_RUNNING = "The answer is still running; decide once it has paused"
APPROVAL_ID_INVALID = "approvalId must be the id of a tool approval"
APPROVED_INVALID = "approved must be true or false"
REASON_INVALID = f"reason must be a string of at most {REASON_CHARS} characters"
EXPIRED_REASON = "No decision was made in time."
SUPERSEDED_REASON = "The member sent a new message instead of deciding."
ENDED_REASON = "The answer ended before the call could be made."


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecision:
    """A member's answer to one approval."""

    approval_id: str
    approved: bool
    reason: str | None = None

    @classmethod
    def parse(cls, approval_id: object, approved: object, reason: object) -> ApprovalDecision:
        """`approvalId` a uuid, `approved` a boolean, `reason` absent or a string of at most
        `REASON_CHARS` characters (trimmed; empty is none)."""
        try:
            if not isinstance(approval_id, str):
                raise ValueError
            parsed = str(uuid.UUID(approval_id))
        except ValueError:
            problem = [field_error("approvalId", APPROVAL_ID_INVALID)]
            raise Invalid(APPROVAL_ID_INVALID, problem) from None
        if not isinstance(approved, bool):
            raise Invalid(APPROVED_INVALID, [field_error("approved", APPROVED_INVALID)])
        if reason is not None and (not isinstance(reason, str) or len(reason) > REASON_CHARS):
            raise Invalid(REASON_INVALID, [field_error("reason", REASON_INVALID)])
        return cls(approval_id=parsed, approved=approved, reason=(reason or "").strip() or None)


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingCall:
    """A call that asked for approval and has no result yet, with its decision if any."""

    approval_id: str
    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]
    expires_at: datetime
    step: int
    decision: ApprovalDecision | None

    def expired(self, now: datetime) -> bool:
        return self.decision is None and now >= self.expires_at


def approval_request_part(
    call_id: str, approval_id: str, expires_at: datetime, step: int
) -> dict[str, Any]:
    return {
        "type": APPROVAL_REQUEST,
        "toolCallId": call_id,
        "approvalId": approval_id,
        "expiresAt": expires_at.isoformat(),
        "step": step,
    }


def approval_response_part(call: PendingCall, decision: ApprovalDecision) -> dict[str, Any]:
    part: dict[str, Any] = {
        "type": APPROVAL_RESPONSE,
        "approvalId": decision.approval_id,
        "toolCallId": call.tool_call_id,
        "approved": decision.approved,
    }
    if decision.reason:
        part["reason"] = decision.reason
    return part


def denied_text(reason: str | None) -> str:
    """What the model is told about a call that was not approved (for `reason`, if any)."""
    text = "The member did not approve this call; it was not made."
    return f"{text} Reason: {reason}" if reason else text


def pending_calls(parts: Sequence[dict[str, Any]]) -> list[PendingCall]:
    """The calls of a message that asked for approval and have no result, in order."""
    invocations = {p.get("toolCallId"): p for p in parts if p.get("type") == TOOL_INVOCATION}
    results = {p.get("toolCallId") for p in parts if p.get("type") == TOOL_RESULT}
    decisions = {
        p.get("approvalId"): ApprovalDecision(
            approval_id=str(p.get("approvalId")),
            approved=bool(p.get("approved")),
            reason=p.get("reason"),
        )
        for p in parts
        if p.get("type") == APPROVAL_RESPONSE
    }
    pending: list[PendingCall] = []
    for part in parts:
        call_id = part.get("toolCallId")
        if part.get("type") != APPROVAL_REQUEST or call_id in results:
            continue
        invocation = invocations.get(call_id, {})
        pending.append(
            PendingCall(
                approval_id=str(part["approvalId"]),
                tool_call_id=str(call_id),
                tool_name=str(invocation.get("toolName", "")),
                arguments=dict(invocation.get("args") or {}),
                expires_at=datetime.fromisoformat(str(part["expiresAt"])),
                step=int(part.get("step", 0)),
                decision=decisions.get(part["approvalId"]),
            )
        )
    return pending


def approval_ids(parts: Sequence[dict[str, Any]]) -> set[str]:
    """The ids of every approval a message asked for, answered or not."""
    return {str(p.get("approvalId")) for p in parts if p.get("type") == APPROVAL_REQUEST}


def settle(parts: list[dict[str, Any]], reason: str) -> list[tuple[PendingCall, ApprovalDecision]]:
    """Deny every pending call without a decision (for `reason`: it expired, or the member
    moved on), adding their responses to `parts`; the pending calls with their decisions, in
    order."""
    settled: list[tuple[PendingCall, ApprovalDecision]] = []
    for call in pending_calls(parts):
        decision = call.decision
        if decision is None:
            decision = ApprovalDecision(approval_id=call.approval_id, approved=False, reason=reason)
            parts.append(approval_response_part(call, decision))
        settled.append((call, decision))
    return settled


def denied_result_part(call: PendingCall, text: str) -> dict[str, Any]:
    """The result of a call that was not made: `text` says why (`denied_text`)."""
    return {
        "type": TOOL_RESULT,
        "toolCallId": call.tool_call_id,
        "toolName": call.tool_name,
        "isError": True,
        "denied": True,
        "result": text,
    }


def close_pending(parts: list[dict[str, Any]], reason: str) -> bool:
    """Close every pending call of an answer that will not continue (the member moved on, or
    the answer ended otherwise): an undecided one is denied for `reason`, and none is made,
    each getting a result that says so. Whether there was any."""
    calls = settle(parts, reason)
    for call, _ in calls:
        parts.append(denied_result_part(call, f"The call was not made. {reason}"))
    return bool(calls)
