"""Background conversation titles (agent-platform-api.md §4.13 rules 2 and 3) with fakes."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from decimal import Decimal

import pytest

from application.ports.chat_model import (
    ChatEvent,
    ChatModelError,
    ChatModelInfo,
    ChatRequest,
    Finished,
    TextDelta,
    Usage,
)
from application.use_cases.generate_conversation_title import (
    GenerateConversationTitle,
    GenerateConversationTitleCommand,
)
from domain.agents import NewAgent
from domain.conversations import NewConversation, TitleSource
from domain.usage import ModelPrice, PriceList, UsagePurpose
from tests.fakes import FakeUnitOfWork
from tests.fakes.agents import FakeAgents
from tests.fakes.chat import (
    FakeUsageLedger,
    ScriptedChatModel,
    ScriptedChatRegistry,
    fake_meter,
    text_script,
)
from tests.fakes.conversations import FakeConversations

ORG = "org_a"
PRICES = PriceList({"openai:title-mini": ModelPrice(Decimal("1"), Decimal("2"))})


class World:
    def __init__(self, *scripts, model: object = None, default: str = "openai:title-mini"):
        self.conversations = FakeConversations()
        self.agents = FakeAgents()
        self.ledger = FakeUsageLedger()
        self.model = model or ScriptedChatModel(*scripts)
        self.registry = ScriptedChatRegistry(lambda: self.model)  # type: ignore[arg-type,return-value]
        self.uow = FakeUnitOfWork(self.conversations, self.agents)
        self.use_case = GenerateConversationTitle(
            self.conversations,
            self.agents,
            self.registry,
            fake_meter(self.ledger, PRICES),
            self.uow,
            default,
            timeout=0.5,
        )

    async def conversation(
        self, parts=None, *, role: str = "Answer in French.", agent: bool = True
    ) -> str:
        agent_id = 0
        if agent:
            created = await self.agents.add(
                NewAgent(
                    org_id=ORG,
                    user_id="user_1",
                    name="Travel helper",
                    description="Plans trips",
                    role=role,
                    model="local:smollm2-135m",
                )
            )
            agent_id = created.id
        thread_id = str(uuid.uuid4())
        await self.conversations.add(
            NewConversation(
                thread_id=thread_id,
                org_id=ORG,
                user_id="user_1",
                agent_id=agent_id,
                title="Plan a week in Lisbon",
                title_source=TitleSource.FALLBACK,
                upstream_conversation_id=None,
            )
        )
        await self.conversations.add_message(
            ORG,
            thread_id,
            message_id=str(uuid.uuid4()),
            role="user",
            parts=parts
            or [
                {"type": "text", "text": "Plan a week in Lisbon for two people in May"},
                {"type": "file", "mediaType": "application/pdf", "url": "u", "filename": "fl.pdf"},
            ],
        )
        return thread_id

    async def run(self, thread_id: str, version: int = 0) -> str | None:
        return await self.use_case.execute(
            GenerateConversationTitleCommand(org_id=ORG, thread_id=thread_id, title_version=version)
        )

    async def title(self, thread_id: str) -> tuple[str | None, TitleSource]:
        conversation = await self.conversations.get(ORG, thread_id)
        assert conversation is not None
        return conversation.title, conversation.title_source


async def test_a_generated_title_replaces_the_fallback():
    world = World(text_script('Title: "Lisbon Trip', ' Planning".\nMore text', usage=(40, 5)))
    thread_id = await world.conversation()
    assert await world.run(thread_id) == "Lisbon Trip Planning"
    assert await world.title(thread_id) == ("Lisbon Trip Planning", TitleSource.GENERATED)
    assert world.uow.commits == 1
    assert world.registry.asked == ["openai:title-mini"]
    (request,) = world.model.requests
    assert request.model == "title-mini"
    assert (request.max_output_tokens, request.temperature) == (24, 0.2)
    system, user = request.turns
    assert system.role == "system" and "short" in system.content
    assert "Travel helper" in system.content and "Plans trips" in system.content
    assert "Answer in French." in system.content
    assert "Plan a week in Lisbon for two people in May" in user.content
    assert "fl.pdf" in user.content
    assert world.model.closed == 1


async def test_usage_is_recorded_with_the_provider_figures_and_the_price():
    world = World(text_script("Lisbon trip", usage=(40, 5)))
    thread_id = await world.conversation()
    await world.run(thread_id)
    (entry,) = world.ledger.entries
    assert (entry.org_id, entry.user_id, entry.thread_id) == (ORG, "user_1", thread_id)
    assert entry.purpose is UsagePurpose.TITLE and entry.model == "openai:title-mini"
    assert (entry.input_tokens, entry.output_tokens, entry.estimated) == (40, 5, False)
    assert entry.cost_usd == Decimal(40 + 2 * 5) / Decimal(1_000_000)


async def test_usage_is_estimated_when_the_provider_reports_none():
    world = World(text_script("Lisbon trip planning", usage=None))
    thread_id = await world.conversation()
    await world.run(thread_id)
    (entry,) = world.ledger.entries
    assert entry.estimated is True
    assert entry.input_tokens == sum(len(t.content) // 4 + 1 for t in world.model.requests[0].turns)
    assert entry.output_tokens == len("Lisbon trip planning") // 4 + 1


async def test_a_rename_before_generation_wins_and_the_model_is_not_called():
    world = World(text_script("Lisbon trip"))
    thread_id = await world.conversation()
    await world.conversations.rename(ORG, thread_id, None)
    assert await world.run(thread_id, version=0) is None
    assert await world.title(thread_id) == (None, TitleSource.RENAMED)
    assert world.model.requests == [] and world.ledger.entries == []


async def test_a_stale_version_is_skipped_even_if_the_title_is_a_fallback():
    world = World(text_script("Lisbon trip"))
    thread_id = await world.conversation()
    assert await world.run(thread_id, version=3) is None
    assert await world.title(thread_id) == ("Plan a week in Lisbon", TitleSource.FALLBACK)
    assert world.model.requests == []


class RenamingModel:
    """Answers, but the member renames the conversation while the answer is being produced."""

    def __init__(self, conversations: FakeConversations) -> None:
        self.conversations = conversations
        self.thread_id = ""
        self.requests: list[ChatRequest] = []

    @property
    def info(self) -> ChatModelInfo:
        return ChatModelInfo(supports_tools=False)

    async def stream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        self.requests.append(request)
        yield TextDelta("Lisbon")
        await self.conversations.rename(ORG, self.thread_id, "My own name")
        yield TextDelta(" trip")
        yield Usage(10, 2)
        yield Finished("stop")


async def test_a_rename_during_generation_wins():
    conversations = FakeConversations()
    model = RenamingModel(conversations)
    world = World(model=model)
    world.conversations = conversations
    world.use_case = GenerateConversationTitle(
        conversations, world.agents, world.registry, fake_meter(world.ledger, PRICES), world.uow,
        "openai:title-mini",
    )  # fmt: skip
    thread_id = await world.conversation()
    model.thread_id = thread_id
    assert await world.run(thread_id) is None
    assert await world.title(thread_id) == ("My own name", TitleSource.RENAMED)
    assert len(world.ledger.entries) == 1


@pytest.mark.parametrize(
    "script",
    [
        [TextDelta("Lisbon"), ChatModelError("The model server is unreachable.")],
        [ChatModelError("timed out")],
        [2.0, TextDelta("too late")],
    ],
    ids=["fails-mid-answer", "fails-at-once", "too-slow"],
)
async def test_a_model_failure_keeps_the_fallback_without_raising(script):
    world = World(script)
    thread_id = await world.conversation()
    assert await world.run(thread_id) is None
    assert await world.title(thread_id) == ("Plan a week in Lisbon", TitleSource.FALLBACK)
    assert world.uow.commits == 0
    assert world.model.closed == 1
    # A call that produced something is charged its estimate; one that produced nothing is
    # taken to have cost nothing, and its reservation is released.
    if isinstance(script[0], TextDelta):
        (entry,) = world.ledger.entries
        assert entry.estimated is True
    else:
        assert world.ledger.entries == [] and len(world.ledger.released) == 1
    assert world.ledger.reserved == {}


async def test_an_unavailable_default_model_keeps_the_fallback():
    world = World(text_script("Lisbon trip"), default="acme:nothing")
    thread_id = await world.conversation()
    assert await world.run(thread_id) is None
    assert await world.title(thread_id) == ("Plan a week in Lisbon", TitleSource.FALLBACK)
    assert world.ledger.entries == []


@pytest.mark.parametrize(
    "answer",
    ["", "   \n\n  ", '""', "***", "Title:", "\x07\x08"],
)
async def test_an_empty_or_garbage_answer_keeps_the_fallback(answer):
    world = World(text_script(answer))
    thread_id = await world.conversation()
    assert await world.run(thread_id) is None
    assert await world.title(thread_id) == ("Plan a week in Lisbon", TitleSource.FALLBACK)
    assert len(world.ledger.entries) == 1


async def test_a_long_answer_is_shortened_to_a_valid_title():
    world = World(text_script("Extraordinarily " * 8))
    thread_id = await world.conversation()
    title = await world.run(thread_id)
    assert title is not None and len(title) <= 80 and "\n" not in title
    assert await world.title(thread_id) == (title, TitleSource.GENERATED)


async def test_an_answer_rather_than_a_title_keeps_the_fallback():
    world = World(text_script("Sure, here is what I think about your question and more " * 3))
    thread_id = await world.conversation()
    assert await world.run(thread_id) is None
    assert (await world.title(thread_id))[1] is TitleSource.FALLBACK


async def test_the_agent_context_is_bounded():
    world = World(text_script("Lisbon trip"))
    thread_id = await world.conversation(role="r" * 5000)
    await world.run(thread_id)
    system = world.model.requests[0].turns[0].content
    assert "r" * 499 in system and "r" * 501 not in system
    assert len(system) < 2000


async def test_attachments_alone_are_enough_and_a_missing_agent_is_fine():
    world = World(text_script("Quarterly report"))
    thread_id = await world.conversation(
        [{"type": "file", "mediaType": "application/pdf", "url": "u", "filename": "q3-report.pdf"}],
        agent=False,
    )
    assert await world.run(thread_id) == "Quarterly report"
    system, user = world.model.requests[0].turns
    assert "q3-report.pdf" in user.content and "assistant:" not in system.content


async def test_a_missing_conversation_is_skipped():
    world = World(text_script("x"))
    assert await world.run(str(uuid.uuid4())) is None
    assert world.model.requests == []


async def test_other_errors_propagate_so_the_queue_retries():
    class BrokenRepository(FakeConversations):
        async def set_generated_title(self, *args, **kwargs):
            raise RuntimeError("database went away")

    world = World(text_script("Lisbon trip"))
    broken = BrokenRepository()
    world.conversations = broken
    world.use_case = GenerateConversationTitle(
        broken,
        world.agents,
        world.registry,
        fake_meter(world.ledger, PRICES),
        world.uow,
        "openai:title-mini",
    )
    thread_id = await world.conversation()
    with pytest.raises(RuntimeError, match="database went away"):
        await world.run(thread_id)
