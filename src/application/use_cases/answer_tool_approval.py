from __future__ import annotations

import copy
import dataclasses
import uuid
from dataclasses import dataclass
from typing import Any

from application.metering import SpendMeter
from application.ports.agent_repository import AgentRepository
from application.ports.audit_log import AuditLog
from application.ports.background_tasks import BackgroundTasks
from application.ports.chat_model import ChatModelRegistry
from application.ports.chat_streams import ChatStreams
from application.ports.clock import Clock
from application.ports.conversation_repository import ConversationRepository
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.generate_chat_response import (
    GenerateChatResponse,
    GenerateChatResponseCommand,
)
from application.use_cases.send_chat_message import admit_answer, spawn_answer
from domain.agents import AGENT_NOT_FOUND
from domain.audit import NewAuditEntry
from domain.conversations import CONVERSATION_NOT_FOUND, StoredMessage, StreamStatus
from domain.errors import Conflict, NotFound
from domain.identity import Caller
from domain.tool_approvals import (
    APPROVAL_ANSWERED,
    APPROVAL_EXPIRED,
    APPROVAL_NOT_FOUND,
    APPROVAL_RUNNING,
    EXPIRED_REASON,
    ApprovalDecision,
    approval_ids,
    approval_response_part,
    pending_calls,
)

TOOL_APPROVED = "tool.approved"
TOOL_DENIED = "tool.denied"
"""The audit log's actions for a member's decision on a tool call."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerToolApprovalCommand:
    caller: Caller
    thread_id: str
    decision: ApprovalDecision


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalAnswered:
    """The decision is recorded; `run_id` is the continuation's run, or None while other
    approvals of the same answer still wait for a decision."""

    thread_id: str
    run_id: str | None


class AnswerToolApproval:
    """Record a member's decision on a tool call their answer paused for, and continue the
    answer once every call it paused for is decided (`CONTRACT.md`, "Tools").

    Rules: the conversation must be the caller's (404 "Conversation not found"); the approval
    must be one its answers asked for (404 "Approval not found"), still pending (409 when
    answered, or the conversation has moved on), and its answer paused (409 while it still
    runs). An expired approval counts as denied: denying it is recorded as any denial,
    approving it is 409, and the answer then goes on without it unless other calls still wait
    for a decision. The decision is stored in the answer's parts and written to the audit log
    (`tool.approved` / `tool.denied`). When no other call of the answer waits for a decision
    (an expired one counts as denied), the answer continues as a new run of the same message,
    admitted against the spend caps like any answer (nothing is stored when refused), and
    produced in the background: its stream starts with the decisions.
    """

    def __init__(
        self,
        agents: AgentRepository,
        conversations: ConversationRepository,
        audit: AuditLog,
        uow: UnitOfWork,
        clock: Clock,
        streams: ChatStreams,
        tasks: BackgroundTasks,
        generate: GenerateChatResponse,
        meter: SpendMeter,
        models: ChatModelRegistry,
    ) -> None:
        self._agents = agents
        self._conversations = conversations
        self._audit = audit
        self._uow = uow
        self._clock = clock
        self._streams = streams
        self._tasks = tasks
        self._generate = generate
        self._meter = meter
        self._models = models

    async def execute(self, command: AnswerToolApprovalCommand) -> ApprovalAnswered:
        caller, thread_id, decision = command.caller, command.thread_id, command.decision
        org_id = caller.org_id
        conversation = await self._conversations.get(org_id, thread_id, for_update=True)
        if conversation is None or conversation.user_id != caller.user_id:
            raise NotFound(CONVERSATION_NOT_FOUND)
        messages = await self._conversations.messages(org_id, thread_id)
        run = await self._conversations.latest_run(org_id, thread_id)
        paused = next((m for m in messages if run is not None and m.id == run.message_id), None)
        calls = pending_calls(paused.parts) if paused is not None else []
        call = next((c for c in calls if c.approval_id == decision.approval_id), None)
        if call is None or paused is None:
            if any(decision.approval_id in approval_ids(m.parts) for m in messages):
                raise Conflict(APPROVAL_ANSWERED)
            raise NotFound(APPROVAL_NOT_FOUND)
        if call.decision is not None:
            raise Conflict(APPROVAL_ANSWERED)
        if conversation.stream_status is StreamStatus.IN_PROGRESS:
            raise Conflict(APPROVAL_RUNNING)
        if conversation.stream_status is not StreamStatus.AWAITING_APPROVAL:
            raise Conflict(APPROVAL_ANSWERED)
        now = self._clock.now()
        waiting = [c for c in calls if c is not call and c.decision is None and not c.expired(now)]
        if call.expired(now) and decision.approved:
            # Too late to approve: the call counts as denied, and the answer goes on without
            # it unless other calls still wait.
            if not waiting:
                parts = copy.deepcopy(paused.parts)
                await self._continue(caller, conversation.agent_id, paused, parts, messages)
            raise Conflict(APPROVAL_EXPIRED)
        if call.expired(now) and not decision.reason:
            decision = dataclasses.replace(decision, reason=EXPIRED_REASON)
        parts = copy.deepcopy(paused.parts)
        parts.append(approval_response_part(call, decision))
        await self._audit.record(
            NewAuditEntry(
                org_id=org_id,
                actor_user_id=caller.user_id,
                action=TOOL_APPROVED if decision.approved else TOOL_DENIED,
                target_type="conversation",
                target_id=thread_id,
                details={
                    "approvalId": decision.approval_id,
                    "toolCallId": call.tool_call_id,
                    "tool": call.tool_name,
                    "agentId": conversation.agent_id,
                },
            )
        )
        if waiting:
            await self._conversations.set_message_parts(org_id, paused.id, parts)
            await self._uow.commit()
            return ApprovalAnswered(thread_id=thread_id, run_id=None)
        return await self._continue(caller, conversation.agent_id, paused, parts, messages)

    async def _continue(
        self,
        caller: Caller,
        agent_id: int | None,
        paused: StoredMessage,
        parts: list[dict[str, Any]],
        messages: list[StoredMessage],
    ) -> ApprovalAnswered:
        org_id, thread_id = caller.org_id, paused.thread_id
        agent = await self._agents.get(org_id, agent_id) if agent_id is not None else None
        if agent is None:
            raise NotFound(AGENT_NOT_FOUND)
        run_id = str(uuid.uuid4())
        written = sum(len(str(p.get("text", ""))) for p in parts if p.get("type") == "text")
        admission = await admit_answer(
            self._meter, self._models, self._generate, caller, agent.model, (thread_id, run_id),
            text_offset=written,
        )  # fmt: skip
        try:
            resumed = await self._conversations.resume_run(
                org_id, thread_id, run_id=run_id, message_id=paused.id, parts=parts
            )
            if resumed is None:
                raise NotFound(APPROVAL_NOT_FOUND)
            await self._uow.commit()
        except BaseException:
            await self._meter.release(admission)
            raise
        message = StoredMessage(
            id=paused.id,
            thread_id=thread_id,
            role=paused.role,
            parts=parts,
            created_at=paused.created_at,
        )
        history = [message if m.id == paused.id else m for m in messages]
        generation = GenerateChatResponseCommand(
            caller=caller,
            thread_id=thread_id,
            run_id=run_id,
            message_id=paused.id,
            agent=agent,
            history=history,
            admission=admission,
            resume=message,
        )
        spawn_answer(self._streams, self._tasks, self._generate, generation)
        return ApprovalAnswered(thread_id=thread_id, run_id=run_id)
