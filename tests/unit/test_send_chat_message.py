"""`SendChatMessage` with fakes: what is written before the answer starts, and the refusals."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest

from application.agent.inline_skills import InlineSkills
from application.ports.job_queue import GENERATE_TITLE
from application.tools.registry import ToolRegistry
from application.use_cases.generate_chat_response import GenerateChatResponse
from application.use_cases.send_chat_message import SendChatMessage, SendChatMessageCommand
from domain.agents import NewAgent
from domain.conversations import StreamStatus, TitleSource
from domain.errors import Conflict, Invalid, NotFound
from domain.identity import Caller
from domain.spend import CapPeriod, SpendCapReached
from tests.fakes import FakeJobQueue, FakeUnitOfWork
from tests.fakes.agents import FakeAgents
from tests.fakes.chat import (
    FakeKnowledgeSearch,
    FakeRunLog,
    FakeUsageLedger,
    RecordingWriter,
    ScriptedChatModel,
    ScriptedChatRegistry,
    fake_meter,
)
from tests.fakes.conversations import FakeConversations
from tests.fakes.skill_catalog import FakeSkillCatalog

ALICE = Caller(user_id="alice", org_id="org_a")
CAROL = Caller(user_id="carol", org_id="org_a")
BOB = Caller(user_id="bob", org_id="org_b")


class Streams:
    def __init__(self) -> None:
        self.opened: list[str] = []

    def open(self, run_id: str) -> RecordingWriter:
        self.opened.append(run_id)
        return RecordingWriter()

    def follow(self, org_id: str, run_id: str):  # pragma: no cover - not used here
        raise NotImplementedError


class Tasks:
    def __init__(self) -> None:
        self.spawned: list[tuple[str, str]] = []

    def spawn(self, name, work, *, key):
        self.spawned.append((name, key))

    def cancel(self, key):
        return False

    async def wait(self, key, seconds):
        return True


class World:
    def __init__(self) -> None:
        self.agents = FakeAgents()
        self.conversations = FakeConversations()
        self.jobs = FakeJobQueue()
        self.uow = FakeUnitOfWork(self.agents, self.conversations, self.jobs)
        self.streams = Streams()
        self.tasks = Tasks()
        self.ledger = FakeUsageLedger()
        generate = GenerateChatResponse(
            ScriptedChatRegistry(ScriptedChatModel()),
            FakeRunLog(),
            FakeKnowledgeSearch(),
            ToolRegistry(),
            InlineSkills(FakeSkillCatalog()),
            fake_meter(),
        )
        self.use_case = SendChatMessage(
            self.agents,
            self.conversations,
            self.jobs,
            self.uow,
            self.streams,
            self.tasks,
            generate,
            fake_meter(self.ledger),
            ScriptedChatRegistry(ScriptedChatModel()),
        )

    async def agent(self, org_id: str = "org_a") -> int:
        agent = await self.agents.add(
            NewAgent(
                org_id=org_id,
                user_id="alice",
                name="Helper",
                description="",
                role="",
                model="local:smollm2-135m",
            )
        )
        self.uow._checkpoint()
        return agent.id

    async def send(self, caller: Caller = ALICE, **fields: object):
        fields.setdefault("messages", [{"role": "user", "parts": [{"type": "text", "text": "Hi"}]}])
        return await self.use_case.execute(SendChatMessageCommand.parse(caller=caller, **fields))


async def test_a_new_conversation_is_committed_with_its_message_and_run_before_the_answer():
    world = World()
    agent_id = await world.agent()
    started = await world.send(agent_id=agent_id, upstream_conversation_id=str(uuid.uuid4()))
    assert started.created
    conversation = await world.conversations.get("org_a", started.thread_id)
    assert conversation is not None
    assert (conversation.title, conversation.title_source) == ("Hi", TitleSource.FALLBACK)
    assert conversation.stream_status is StreamStatus.IN_PROGRESS
    assert conversation.upstream_conversation_id is not None
    messages = await world.conversations.messages("org_a", started.thread_id)
    assert [(m.role, m.parts) for m in messages] == [
        ("user", [{"type": "text", "text": "Hi"}]),
        ("assistant", []),
    ]
    assert messages[1].id == started.message_id
    assert world.uow.commits == 1
    assert [j.kind for j in world.jobs.jobs] == [GENERATE_TITLE]
    assert world.streams.opened == [started.run_id]
    assert world.tasks.spawned == [("chat-response", started.run_id)]


async def test_a_supplied_title_is_kept_and_no_title_job_is_queued():
    world = World()
    started = await world.send(agent_id=await world.agent(), title="  Trip  ")
    conversation = await world.conversations.get("org_a", started.thread_id)
    assert conversation is not None
    assert (conversation.title, conversation.title_source) == ("Trip", TitleSource.SUPPLIED)
    assert world.jobs.jobs == []


async def test_a_follow_up_goes_to_the_same_thread():
    world = World()
    agent_id = await world.agent()
    first = await world.send(agent_id=agent_id)
    run = await world.conversations.running_run("org_a", first.thread_id)
    assert run is not None
    world.conversations.end_run(run.id, StreamStatus.COMPLETED)
    second = await world.send(agent_id=agent_id, thread_id=first.thread_id.upper())
    assert second.thread_id == first.thread_id and not second.created
    messages = await world.conversations.messages("org_a", first.thread_id)
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"agent_id": None}, Invalid, "Valid agent ID is required"),
        ({"agent_id": "x"}, Invalid, "Valid agent ID is required"),
        ({"agent_id": 999}, NotFound, "Agent not found"),
        ({"messages": []}, Invalid, "messages must be a non-empty array"),
        ({"thread_id": "nope"}, Invalid, "threadId must be a valid UUID"),
        ({"title": "a\nb"}, Invalid, "title must be a single line"),
        ({"upstream_conversation_id": 5}, Invalid, "upstreamConversationId must be a valid UUID"),
    ],
)
async def test_refusals_write_nothing(fields, error, message):
    world = World()
    agent_id = await world.agent()
    with pytest.raises(error) as raised:
        await world.send(**{"agent_id": agent_id, **fields})
    assert raised.value.message == message
    assert world.conversations.rows == {}
    assert world.tasks.spawned == []


async def test_threads_of_others_and_busy_threads_are_refused():
    world = World()
    agent_id = await world.agent()
    first = await world.send(agent_id=agent_id)
    with pytest.raises(Conflict):
        await world.send(agent_id=agent_id, thread_id=first.thread_id)
    with pytest.raises(Invalid, match="title can only be given"):
        await world.send(agent_id=agent_id, thread_id=first.thread_id, title="x")
    with pytest.raises(NotFound, match="Conversation not found"):
        await world.send(CAROL, agent_id=agent_id, thread_id=first.thread_id)
    other = await world.agent("org_b")
    with pytest.raises(NotFound, match="Conversation not found"):
        await world.send(BOB, agent_id=other, thread_id=first.thread_id)
    with pytest.raises(NotFound, match="Agent not found"):
        await world.send(BOB, agent_id=agent_id)
    second_agent = await world.agent()
    run = await world.conversations.running_run("org_a", first.thread_id)
    assert run is not None
    world.conversations.end_run(run.id, StreamStatus.COMPLETED)
    with pytest.raises(Invalid, match="another agent"):
        await world.send(agent_id=second_agent, thread_id=first.thread_id)


async def test_a_message_at_a_spend_cap_is_refused_before_anything_is_stored():
    world = World()
    agent_id = await world.agent()
    world.ledger.caps = {CapPeriod.DAILY: Decimal(0)}
    with pytest.raises(SpendCapReached) as refused:
        await world.send(agent_id=agent_id)
    assert [b.period for b in refused.value.breaches] == [CapPeriod.DAILY]
    assert world.conversations.rows == {} and world.jobs.jobs == []
    assert world.uow.commits == 0 and world.tasks.spawned == []


async def test_the_admission_reserves_the_models_whole_context_and_is_handed_to_the_answer():
    world = World()
    agent_id = await world.agent()
    world.ledger.caps = {CapPeriod.DAILY: Decimal(1000)}
    started = await world.send(agent_id=agent_id)
    (reservation_id,) = world.ledger.reserved
    assert world.tasks.spawned == [("chat-response", started.run_id)]
    assert reservation_id not in world.ledger.released


async def test_a_refused_send_after_admission_releases_it():
    world = World()
    agent_id = await world.agent()
    world.ledger.caps = {CapPeriod.DAILY: Decimal(1000)}
    with pytest.raises(NotFound):
        await world.send(agent_id=agent_id, thread_id=str(uuid.uuid4()))
    assert world.ledger.reserved == {} and len(world.ledger.released) == 1
