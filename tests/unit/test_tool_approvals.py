"""Approval of tool calls: the rules on a message's parts (`domain.tool_approvals`), an answer
that pauses for a call needing approval and continues once it is decided
(`GenerateChatResponse`), and the member's decision (`AnswerToolApproval`)."""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from application.agent.approvals import message_turns
from application.agent.inline_skills import InlineSkills
from application.ports.agent_tool import ToolApprovalRequired, ToolContext, ToolOffer
from application.ports.chat_model import Finished, ToolCall, ToolCallRequested, ToolSpec
from application.tools.registry import Toolbox, ToolRegistry
from application.use_cases.answer_tool_approval import (
    TOOL_APPROVED,
    TOOL_DENIED,
    AnswerToolApproval,
    AnswerToolApprovalCommand,
)
from application.use_cases.generate_chat_response import (
    MAX_STEPS,
    GenerateChatResponse,
    GenerateChatResponseCommand,
)
from application.use_cases.send_chat_message import SendChatMessage, SendChatMessageCommand
from domain.agents import Agent, NewAgent
from domain.conversations import StoredMessage, StreamStatus
from domain.errors import Conflict, Invalid, NotFound
from domain.identity import Caller
from domain.spend import CapPeriod, SpendCapReached
from domain.tool_approvals import (
    APPROVAL_ANSWERED,
    APPROVAL_EXPIRED,
    APPROVAL_NOT_FOUND,
    APPROVAL_RUNNING,
    ENDED_REASON,
    EXPIRED_REASON,
    SUPERSEDED_REASON,
    ApprovalDecision,
    pending_calls,
)
from tests.fakes import FakeJobQueue, FakeUnitOfWork
from tests.fakes.agents import FakeAgents
from tests.fakes.agents import an_agent as agent
from tests.fakes.basics import FakeClock
from tests.fakes.chat import (
    FakeKnowledgeSearch,
    FakeRunLog,
    FakeUsageLedger,
    RecordingWriter,
    ScriptedChatModel,
    ScriptedChatRegistry,
    fake_meter,
    text_script,
)
from tests.fakes.conversations import FakeConversations
from tests.fakes.members import FakeAuditLog
from tests.fakes.skill_catalog import FakeSkillCatalog
from tests.unit.test_send_chat_message import Streams, Tasks

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TTL = 3600.0
ALICE = Caller(user_id="alice", org_id="org_a")
CAROL = Caller(user_id="carol", org_id="org_a")
SEND = ToolCall(id="call_send", name="mail__send", arguments={"to": "ada@example.com"})
DRAFT = ToolCall(id="call_draft", name="mail__draft", arguments={"text": "Hi"})


class Mail:
    """`mail__send` needs approval, `mail__draft` does not."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.drafts: list[dict[str, Any]] = []

    async def offer(self, caller: Caller, the_agent: Agent) -> list[ToolOffer]:
        async def send(arguments: dict[str, Any], context: ToolContext) -> Any:
            if not context.approved:
                raise ToolApprovalRequired
            self.sent.append(arguments)
            return {"sent": True}

        async def draft(arguments: dict[str, Any], context: ToolContext) -> Any:
            self.drafts.append(arguments)
            return {"draft": 1}

        schema = {"type": "object", "properties": {}}
        return [
            ToolOffer(spec=ToolSpec(name="mail__send", description="Send", parameters=schema),
                      execute=send),
            ToolOffer(spec=ToolSpec(name="mail__draft", description="Draft", parameters=schema),
                      execute=draft),
        ]  # fmt: skip


def calls(*tool_calls: ToolCall) -> list[Any]:
    return [*(ToolCallRequested(call) for call in tool_calls), Finished("tool-calls")]


def generator(model: ScriptedChatModel, runs: FakeRunLog, mail: Mail, clock: FakeClock):
    return GenerateChatResponse(
        ScriptedChatRegistry(model),
        runs,
        FakeKnowledgeSearch(),
        ToolRegistry([mail]),
        InlineSkills(FakeSkillCatalog()),
        fake_meter(),
        approval_ttl=TTL,
        clock=clock,
    )


def user_message() -> StoredMessage:
    return StoredMessage(
        id="m1",
        thread_id="t1",
        role="user",
        parts=[{"type": "text", "text": "Mail Ada"}],
        created_at=NOW,
    )


class Answer:
    """One answer produced by `GenerateChatResponse` with the `Mail` tools."""

    def __init__(self, *scripts: list[Any]) -> None:
        self.model = ScriptedChatModel(*scripts, supports_tools=True)
        self.runs = FakeRunLog()
        self.mail = Mail()
        self.clock = FakeClock(NOW)
        self.use_case = generator(self.model, self.runs, self.mail, self.clock)

    async def run(self, run_id: str, resume: StoredMessage | None = None) -> RecordingWriter:
        self.runs.start(run_id)
        writer = RecordingWriter()
        history = [user_message()] + ([resume] if resume is not None else [])
        command = GenerateChatResponseCommand(
            caller=ALICE,
            thread_id="t1",
            run_id=run_id,
            message_id="msg-1",
            agent=agent(),
            history=history,
            resume=resume,
        )
        await self.use_case.execute(command, writer)
        return writer

    def paused_message(self, run_id: str, *decisions: ApprovalDecision) -> StoredMessage:
        parts = copy.deepcopy(self.runs.parts[run_id])
        for decision in decisions:
            (call,) = [c for c in pending_calls(parts) if c.approval_id == decision.approval_id]
            parts.append(
                {"type": "tool-approval-response", "approvalId": decision.approval_id,
                 "toolCallId": call.tool_call_id, "approved": decision.approved,
                 **({"reason": decision.reason} if decision.reason else {})}
            )  # fmt: skip
        return StoredMessage(id="msg-1", thread_id="t1", role="assistant", parts=parts,
                             created_at=NOW)  # fmt: skip


def approval_id(writer: RecordingWriter) -> str:
    (request,) = [c for c in writer.chunks if c["type"] == "tool-approval-request"]
    return str(request["approvalId"])


async def test_a_call_needing_approval_pauses_the_answer_after_the_steps_other_calls():
    answer = Answer(calls(SEND, DRAFT))
    writer = await answer.run("run-1")
    # The request comes once the step's other calls are made: a member cannot answer it while
    # the answer still runs them.
    assert writer.types == [
        "start", "start-step",
        "tool-input-start", "tool-input-available",
        "tool-input-start", "tool-input-available", "tool-output-available",
        "tool-approval-request", "finish-step", "finish",
    ]  # fmt: skip
    request = writer.chunks[7]
    assert request == {
        "type": "tool-approval-request",
        "approvalId": request["approvalId"],
        "toolCallId": "call_send",
    }
    assert answer.mail.sent == [] and answer.mail.drafts == [{"text": "Hi"}]
    assert answer.runs.status["run-1"] is StreamStatus.AWAITING_APPROVAL
    parts = answer.runs.parts["run-1"]
    assert [p["type"] for p in parts] == [
        "tool-invocation", "tool-invocation", "tool-result", "tool-approval-request"
    ]  # fmt: skip
    assert parts[3] == {
        "type": "tool-approval-request",
        "toolCallId": "call_send",
        "approvalId": request["approvalId"],
        "expiresAt": (NOW + timedelta(seconds=TTL)).isoformat(),
        "step": 0,
    }
    (pending,) = pending_calls(parts)
    assert (pending.tool_name, pending.arguments, pending.decision) == (
        "mail__send", SEND.arguments, None
    )  # fmt: skip
    assert len(answer.model.requests) == 1


async def test_an_approved_call_is_made_and_the_answer_goes_on_from_the_message():
    answer = Answer(calls(SEND, DRAFT), text_script("Sent."))
    first = await answer.run("run-1")
    decision = ApprovalDecision(approval_id=approval_id(first), approved=True)
    writer = await answer.run("run-2", answer.paused_message("run-1", decision))
    assert writer.types == [
        "start", "tool-approval-response", "tool-output-available",
        "start-step", "text-start", "text-delta", "text-end", "finish-step", "finish",
    ]  # fmt: skip
    assert writer.chunks[0] == {"type": "start", "messageId": "msg-1"}
    assert writer.chunks[1] == {
        "type": "tool-approval-response", "approvalId": decision.approval_id, "approved": True
    }  # fmt: skip
    assert answer.mail.sent == [SEND.arguments]
    assert answer.runs.status["run-2"] is StreamStatus.COMPLETED
    prompt = answer.model.requests[1].turns
    assert [t.role for t in prompt] == ["system", "user", "assistant", "tool", "tool"]
    assert prompt[2].tool_calls == (SEND, DRAFT)
    assert {t.tool_call_id: t.content for t in prompt[3:]} == {
        "call_draft": '{"draft": 1}', "call_send": '{"sent": true}'
    }  # fmt: skip
    stored = answer.runs.parts["run-2"]
    assert stored[: len(answer.runs.parts["run-1"])] == answer.runs.parts["run-1"]
    assert [p["type"] for p in stored[-3:]] == ["tool-approval-response", "tool-result", "text"]
    assert pending_calls(stored) == []


async def test_a_denied_call_is_not_made_and_the_model_is_told_why():
    answer = Answer(calls(SEND), text_script("I did not send it."))
    first = await answer.run("run-1")
    decision = ApprovalDecision(approval_id=approval_id(first), approved=False, reason="Not Ada")
    writer = await answer.run("run-2", answer.paused_message("run-1", decision))
    assert writer.chunks[1] == {
        "type": "tool-approval-response",
        "approvalId": decision.approval_id,
        "approved": False,
        "reason": "Not Ada",
    }
    assert writer.chunks[2] == {"type": "tool-output-denied", "toolCallId": "call_send"}
    assert answer.mail.sent == []
    tool_turn = answer.model.requests[1].turns[-1]
    assert tool_turn.role == "tool" and "did not approve" in tool_turn.content
    assert "Not Ada" in tool_turn.content
    result = answer.runs.parts["run-2"][-2]
    assert result["denied"] is True and result["isError"] is True


async def test_an_undecided_call_counts_as_denied_for_having_expired():
    answer = Answer(calls(SEND), text_script("No answer came."))
    await answer.run("run-1")
    writer = await answer.run("run-2", answer.paused_message("run-1"))
    assert writer.chunks[1]["approved"] is False
    assert writer.chunks[1]["reason"] == EXPIRED_REASON
    assert "tool-output-denied" in writer.types and answer.mail.sent == []


async def test_the_step_limit_counts_the_steps_before_the_pause():
    scripts = [calls(DRAFT)] * (MAX_STEPS - 1) + [calls(SEND)]
    answer = Answer(*scripts, text_script("Done."))
    first = await answer.run("run-1")
    assert answer.runs.parts["run-1"][-1]["step"] == MAX_STEPS - 1
    decision = ApprovalDecision(approval_id=approval_id(first), approved=True)
    await answer.run("run-2", answer.paused_message("run-1", decision))
    # The budget is spent: the model answers once more, without tools.
    assert len(answer.model.requests) == MAX_STEPS + 1
    assert answer.model.requests[-1].tools == ()


async def test_an_answer_that_ends_otherwise_closes_the_calls_it_asked_approval_for():
    answer = Answer(calls(SEND))
    answer.runs.cancel_requested.add("run-1")  # seen when the step is stored
    writer = await answer.run("run-1")
    assert "tool-approval-request" in writer.types and writer.types[-1] == "abort"
    assert answer.runs.status["run-1"] is StreamStatus.CANCELLED
    parts = answer.runs.parts["run-1"]
    assert pending_calls(parts) == []
    assert parts[-2]["approved"] is False and parts[-2]["reason"] == ENDED_REASON
    assert parts[-1]["denied"] is True and "not made" in parts[-1]["result"]


def test_message_turns_group_each_steps_calls_and_leave_out_a_call_without_a_result():
    parts = [
        {"type": "text", "text": "Looking."},
        {"type": "tool-invocation", "toolCallId": "a", "toolName": "t", "args": {"q": 1}},
        {"type": "tool-result", "toolCallId": "a", "toolName": "t", "result": {"n": 1}},
        {"type": "text", "text": "Now the next."},
        {"type": "tool-invocation", "toolCallId": "b", "toolName": "t", "args": {}},
        {"type": "tool-result", "toolCallId": "b", "toolName": "t", "result": "Down",
         "isError": True},
        {"type": "tool-invocation", "toolCallId": "c", "toolName": "t", "args": {}},
    ]  # fmt: skip
    turns = message_turns(parts)
    assert [(t.role, t.content) for t in turns] == [
        ("assistant", "Looking."), ("tool", '{"n": 1}'),
        ("assistant", "Now the next."), ("tool", "Down"),
    ]  # fmt: skip
    assert [c.id for c in turns[2].tool_calls] == ["b"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"approval_id": "nope", "approved": True, "reason": None}, "approvalId"),
        ({"approval_id": None, "approved": True, "reason": None}, "approvalId"),
        ({"approval_id": "0" * 32, "approved": "yes", "reason": None}, "approved"),
        ({"approval_id": "0" * 32, "approved": True, "reason": "x" * 1001}, "reason"),
        ({"approval_id": "0" * 32, "approved": True, "reason": 3}, "reason"),
    ],
)
def test_a_decision_is_validated(fields, field):
    with pytest.raises(Invalid) as refused:
        ApprovalDecision.parse(**fields)
    assert refused.value.details[0]["field"] == field


class Thread:
    """A conversation whose answer paused on `mail__send`, and the use cases around it."""

    def __init__(self) -> None:
        self.agents = FakeAgents()
        self.conversations = FakeConversations()
        self.audit = FakeAuditLog()
        self.jobs = FakeJobQueue()
        self.uow = FakeUnitOfWork(self.agents, self.conversations, self.audit, self.jobs)
        self.clock = FakeClock(NOW)
        self.streams, self.tasks = Streams(), Tasks()
        self.model = ScriptedChatModel(supports_tools=True)
        generate = generator(self.model, FakeRunLog(), Mail(), self.clock)
        registry = ScriptedChatRegistry(self.model)
        self.ledger = FakeUsageLedger()
        self.approvals = AnswerToolApproval(
            self.agents, self.conversations, self.audit, self.uow, self.clock,
            self.streams, self.tasks, generate, fake_meter(self.ledger), registry,
        )  # fmt: skip
        self.send = SendChatMessage(
            self.agents, self.conversations, self.jobs, self.uow, self.streams, self.tasks,
            generate, fake_meter(), registry,
        )  # fmt: skip

    async def paused(
        self, *tool_calls: ToolCall, status: StreamStatus = StreamStatus.AWAITING_APPROVAL
    ) -> tuple[str, list[str]]:
        """A conversation of Alice's whose answer asked approval for `tool_calls`."""
        the_agent = await self.agents.add(
            NewAgent(org_id="org_a", user_id="alice", name="Mailer", description="", role="",
                     model="openai:gpt-4o-mini")
        )  # fmt: skip
        started = await self.send.execute(
            SendChatMessageCommand.parse(
                caller=ALICE, agent_id=the_agent.id,
                messages=[{"role": "user", "parts": [{"type": "text", "text": "Mail Ada"}]}],
            )
        )  # fmt: skip
        ids = [f"00000000-0000-4000-8000-00000000000{n}" for n in range(len(tool_calls))]
        parts: list[dict[str, Any]] = []
        for call, approval in zip(tool_calls, ids, strict=True):
            parts.append({"type": "tool-invocation", "toolCallId": call.id,
                          "toolName": call.name, "args": call.arguments})  # fmt: skip
            parts.append({"type": "tool-approval-request", "toolCallId": call.id,
                          "approvalId": approval, "step": 0,
                          "expiresAt": (NOW + timedelta(seconds=TTL)).isoformat()})  # fmt: skip
        await self.conversations.set_message_parts("org_a", started.message_id, parts)
        run = self.conversations.runs[started.run_id]
        self.conversations.runs[run.id] = dataclasses.replace(run, status=status)
        conversation = await self.conversations.get("org_a", started.thread_id)
        assert conversation is not None
        self.conversations._touch(conversation, stream_status=status, updated_at=NOW)
        self.uow._checkpoint()
        self.tasks.spawned.clear()
        return started.thread_id, ids

    async def decide(self, thread_id: str, approval: str, approved: bool, caller=ALICE) -> Any:
        decision = ApprovalDecision(approval_id=approval, approved=approved, reason=None)
        return await self.approvals.execute(
            AnswerToolApprovalCommand(caller=caller, thread_id=thread_id, decision=decision)
        )

    async def parts(self, thread_id: str) -> list[dict[str, Any]]:
        messages = await self.conversations.messages("org_a", thread_id)
        return messages[-1].parts


async def test_the_last_decision_continues_the_answer_as_a_new_run_of_the_same_message():
    thread = Thread()
    thread_id, (first, second) = await thread.paused(SEND, DRAFT)
    answered = await thread.decide(thread_id, first, True)
    assert answered.run_id is None and thread.tasks.spawned == []
    assert [p["type"] for p in await thread.parts(thread_id)][-1] == "tool-approval-response"
    answered = await thread.decide(thread_id, second, False)
    assert answered.run_id is not None
    assert thread.tasks.spawned == [("chat-response", answered.run_id)]
    run = thread.conversations.runs[answered.run_id]
    messages = await thread.conversations.messages("org_a", thread_id)
    assert run.message_id == messages[-1].id and len(messages) == 2
    conversation = await thread.conversations.get("org_a", thread_id)
    assert conversation is not None and conversation.stream_status is StreamStatus.IN_PROGRESS
    assert [e.action for e in thread.audit.of("org_a")] == [TOOL_APPROVED, TOOL_DENIED]
    assert thread.audit.of("org_a")[0].details["tool"] == "mail__send"


async def test_refusals_change_nothing():
    thread = Thread()
    thread_id, (approval,) = await thread.paused(SEND)
    before = copy.deepcopy(await thread.parts(thread_id))
    with pytest.raises(NotFound, match="Conversation not found"):
        await thread.decide(thread_id, approval, True, caller=CAROL)
    with pytest.raises(NotFound, match=APPROVAL_NOT_FOUND):
        await thread.decide(thread_id, "00000000-0000-4000-8000-0000000000ff", True)
    assert await thread.parts(thread_id) == before and thread.tasks.spawned == []
    await thread.decide(thread_id, approval, True)
    with pytest.raises(Conflict, match=APPROVAL_ANSWERED):
        await thread.decide(thread_id, approval, False)


async def test_a_new_message_closes_the_pending_calls_as_not_made():
    thread = Thread()
    thread_id, (approval,) = await thread.paused(SEND)
    conversation = await thread.conversations.get("org_a", thread_id)
    assert conversation is not None and conversation.agent_id is not None
    await thread.send.execute(
        SendChatMessageCommand.parse(
            caller=ALICE, agent_id=conversation.agent_id, thread_id=thread_id,
            messages=[{"role": "user", "parts": [{"type": "text", "text": "Never mind"}]}],
        )
    )  # fmt: skip
    messages = await thread.conversations.messages("org_a", thread_id)
    paused = messages[1].parts
    assert pending_calls(paused) == []
    assert paused[-2]["reason"] == SUPERSEDED_REASON and paused[-1]["denied"] is True
    with pytest.raises(Conflict, match=APPROVAL_ANSWERED):
        await thread.decide(thread_id, approval, True)


async def test_no_decision_while_the_answer_that_asked_still_runs():
    thread = Thread()
    thread_id, (approval,) = await thread.paused(SEND, status=StreamStatus.IN_PROGRESS)
    with pytest.raises(Conflict, match=APPROVAL_RUNNING):
        await thread.decide(thread_id, approval, True)


async def test_an_expired_approval_can_be_denied_and_approving_it_still_lets_the_answer_go_on():
    thread = Thread()
    thread_id, (approval,) = await thread.paused(SEND)
    thread.clock.advance(TTL)
    with pytest.raises(Conflict, match=APPROVAL_EXPIRED):
        await thread.decide(thread_id, approval, True)
    # Counted as denied: the answer goes on without it, nothing recorded as the member's.
    assert len(thread.tasks.spawned) == 1 and thread.audit.of("org_a") == []
    thread = Thread()
    thread_id, (approval,) = await thread.paused(SEND)
    thread.clock.advance(TTL)
    answered = await thread.decide(thread_id, approval, False)
    assert answered.run_id is not None
    assert [e.action for e in thread.audit.of("org_a")] == [TOOL_DENIED]
    # Dismissed without a reason: the model is told it expired.
    assert (await thread.parts(thread_id))[-1]["reason"] == EXPIRED_REASON


async def test_a_provider_that_repeats_call_ids_still_gets_each_call_answered_apart():
    again = ToolCall(id="call_draft", name="mail__send", arguments={"to": "bo@example.com"})
    answer = Answer(calls(DRAFT), calls(again), text_script("Sent."))
    first = await answer.run("run-1")
    request = next(c for c in first.chunks if c["type"] == "tool-approval-request")
    assert request["toolCallId"] not in ("", "call_draft")
    (pending,) = pending_calls(answer.runs.parts["run-1"])
    assert pending.arguments == again.arguments
    decision = ApprovalDecision(approval_id=request["approvalId"], approved=True)
    await answer.run("run-2", answer.paused_message("run-1", decision))
    assert answer.mail.sent == [again.arguments]
    ids = [t.tool_call_id for t in answer.model.requests[-1].turns if t.role == "tool"]
    assert ids == ["call_draft", request["toolCallId"]]


def test_tools_revealed_before_the_pause_stay_offered():
    spec = ToolSpec(name="kit__hidden", description="Hidden", parameters={"type": "object"})

    async def execute(arguments: dict[str, Any], context: ToolContext) -> Any:
        return None

    toolbox = Toolbox([ToolOffer(spec=spec, execute=execute, listed=False)])
    assert toolbox.specs == []
    toolbox.reveal(["kit__hidden", "kit__unknown"])
    assert toolbox.specs == [spec]


async def test_a_paused_answer_is_stored_as_paused_before_its_readers_see_it_end():
    answer = Answer(calls(SEND))
    seen: list[StreamStatus] = []

    class Watching(RecordingWriter):
        def emit(self, chunk: dict[str, Any]) -> None:
            if chunk["type"] == "finish":
                seen.append(answer.runs.status["run-1"])
            super().emit(chunk)

    answer.runs.start("run-1")
    command = GenerateChatResponseCommand(
        caller=ALICE, thread_id="t1", run_id="run-1", message_id="msg-1", agent=agent(),
        history=[user_message()],
    )  # fmt: skip
    writer = Watching()
    await answer.use_case.execute(command, writer)
    assert seen == [StreamStatus.AWAITING_APPROVAL]
    assert writer.types[-2:] == ["finish-step", "finish"]
    assert [c["type"] for c in answer.runs.chunks["run-1"]][-1] == "finish"


async def test_a_continuation_refused_at_a_spend_cap_stores_nothing():
    thread = Thread()
    thread_id, (approval,) = await thread.paused(SEND)
    before = copy.deepcopy(await thread.parts(thread_id))
    runs = dict(thread.conversations.runs)
    commits = thread.uow.commits
    thread.ledger.caps = {CapPeriod.DAILY: Decimal(0)}
    with pytest.raises(SpendCapReached):
        await thread.decide(thread_id, approval, True)
    assert await thread.parts(thread_id) == before and thread.conversations.runs == runs
    assert thread.uow.commits == commits and thread.tasks.spawned == []
    conversation = await thread.conversations.get("org_a", thread_id)
    assert conversation is not None
    assert conversation.stream_status is StreamStatus.AWAITING_APPROVAL
    thread.ledger.caps = {}
    assert (await thread.decide(thread_id, approval, True)).run_id is not None
