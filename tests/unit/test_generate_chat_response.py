"""`GenerateChatResponse` with fakes: the chunk sequence, what is stored, cancel and failure."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from application.agent.inline_skills import InlineSkills
from application.agent.tool_calls import TOOL_RESULT_CHARS
from application.metering import MeteredCall, Reservation
from application.ports.agent_tool import AgentTool, ToolContext, ToolFailed, ToolOffer
from application.ports.background_tasks import CANCEL_REQUESTED
from application.ports.chat_model import (
    ChatModelError,
    Finished,
    TextDelta,
    ToolCall,
    ToolCallRequested,
    ToolSpec,
    Usage,
)
from application.ports.embedder import EmbeddingFailed
from application.tools.knowledge_search import KnowledgeSearchTool
from application.tools.load_skill import LoadSkillTool
from application.tools.registry import ToolRegistry
from application.use_cases import generate_chat_response as module
from application.use_cases.generate_chat_response import (
    FAILED_UNEXPECTEDLY,
    STOPPED_BY_SHUTDOWN,
    GenerateChatResponse,
    GenerateChatResponseCommand,
)
from domain.agents import Agent
from domain.chunks import SearchResult
from domain.conversations import StoredMessage, StreamStatus
from domain.identity import Caller
from domain.search import Filter
from domain.spend import CapPeriod
from domain.usage import UsagePurpose
from tests.fakes.agents import an_agent as agent
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
from tests.fakes.skill_catalog import FakeSkill, FakeSkillCatalog

NOW = datetime(2026, 1, 1, tzinfo=UTC)
CALLER = Caller(user_id="user_1", org_id="org_a")


def message(role: str, text: str, number: int = 1) -> StoredMessage:
    return StoredMessage(
        id=f"m{number}",
        thread_id="t1",
        role=role,
        parts=[{"type": "text", "text": text}],
        created_at=NOW,
    )


def command(the_agent: Agent | None = None, history: list[StoredMessage] | None = None):
    return GenerateChatResponseCommand(
        caller=CALLER,
        thread_id="t1",
        run_id="run-1",
        message_id="msg-1",
        agent=the_agent or agent(),
        history=history or [message("user", "What is the leave policy?")],
    )


class World:
    def __init__(
        self,
        model: ScriptedChatModel,
        passages: list[SearchResult] | None = None,
        more_tools: list[AgentTool] | None = None,
        search: FakeKnowledgeSearch | None = None,
    ):
        self.model = model
        self.runs = FakeRunLog()
        self.runs.start("run-1")
        self.ledger = FakeUsageLedger()
        self.search = search or FakeKnowledgeSearch(passages)
        self.skills = FakeSkillCatalog(
            FakeSkill(id=3, name="tone", description="House style", body="# Tone\nBe kind.")
        )
        self.writer = RecordingWriter()
        self.use_case = GenerateChatResponse(
            ScriptedChatRegistry(model),
            self.runs,
            self.search,
            ToolRegistry(
                [KnowledgeSearchTool(self.search), LoadSkillTool(self.skills), *(more_tools or [])]
            ),
            InlineSkills(self.skills),
            fake_meter(self.ledger),
        )

    async def run(self, cmd: GenerateChatResponseCommand | None = None) -> None:
        await self.use_case.execute(cmd or command(), self.writer)

    @property
    def stored(self) -> list[str]:
        return [c["type"] for c in self.runs.chunks["run-1"]]


def passage(chunk_id: int, page: int | None = 3) -> SearchResult:
    return SearchResult(
        file_id="f1",
        file_name="handbook.pdf",
        knowledge_base_id=1,
        chunk_id=chunk_id,
        text="Employees get 25 days of leave.",
        score=0.9,
        page_number=page,
    )


async def test_a_text_answer_streams_in_protocol_order_and_is_stored_whole():
    world = World(ScriptedChatModel(text_script("Twenty", "-five ", "days.")))
    await world.run()
    assert world.writer.types == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-delta",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    assert world.writer.chunks[0] == {"type": "start", "messageId": "msg-1"}
    assert world.writer.closed
    # Stored in the short form: the deltas of one text part become one.
    assert world.stored == [t for i, t in enumerate(world.writer.types) if i not in (4, 5)]
    stored_delta = world.runs.chunks["run-1"][3]
    assert stored_delta["delta"] == "Twenty-five days."
    assert world.runs.status["run-1"] is StreamStatus.COMPLETED
    assert world.runs.parts["run-1"] == [{"type": "text", "text": "Twenty-five days."}]
    (entry,) = world.ledger.entries
    assert (entry.input_tokens, entry.output_tokens, entry.estimated) == (12, 3, False)
    assert entry.model == "openai:gpt-4o-mini" and entry.thread_id == "t1"
    assert entry.cost_usd > 0


async def test_the_prompt_holds_the_role_the_agent_and_the_history():
    model = ScriptedChatModel(text_script("ok"))
    world = World(model)
    history = [message("user", "Hi", 1), message("assistant", "Hello!", 2), message("user", "Q", 3)]
    await world.run(command(history=history))
    (request,) = model.requests
    assert request.model == "gpt-4o-mini"
    system = request.turns[0]
    assert system.role == "system"
    assert "You answer briefly." in system.content and "Helper" in system.content
    assert [(t.role, t.content) for t in request.turns[1:]] == [
        ("user", "Hi"),
        ("assistant", "Hello!"),
        ("user", "Q"),
    ]
    assert not request.tools


async def test_knowledge_base_passages_go_into_the_prompt_and_come_back_as_sources():
    model = ScriptedChatModel(text_script("25 days."))
    world = World(model, [passage(11), passage(12, page=None)])
    await world.run(command(agent(knowledge_base_ids=[1, 2])))
    assert world.search.queries == [([1, 2], "What is the leave policy?", 4)]
    assert "Employees get 25 days of leave." in model.requests[0].turns[0].content
    types = world.writer.types
    assert types[types.index("text-end") + 1 : types.index("finish-step")] == [
        "source-document",
        "source-document",
    ]
    sources = [c for c in world.writer.chunks if c["type"] == "source-document"]
    assert sources[0] == {
        "type": "source-document",
        "sourceId": "chunk-11",
        "mediaType": "text/plain",
        "title": "handbook.pdf, page 3",
        "filename": "handbook.pdf",
        "providerMetadata": {"agentPlatform": {"kbId": 1, "fileId": "f1", "pageNumber": 3}},
    }
    assert [p["type"] for p in world.runs.parts["run-1"]] == [
        "text",
        "source-document",
        "source-document",
    ]


async def test_a_tool_capable_model_searches_through_the_tool_then_answers():
    call = ToolCall(id="call_1", name="search_knowledge_base", arguments={"query": "leave"})
    model = ScriptedChatModel(
        [ToolCallRequested(call), Finished("tool-calls")],
        text_script("You get 25 days."),
        supports_tools=True,
    )
    world = World(model, [passage(11)])
    await world.run(command(agent(knowledge_base_ids=[1])))
    assert [t.name for t in model.requests[0].tools] == ["search_knowledge_base"]
    assert world.writer.types == [
        "start",
        "start-step",
        "source-document",
        "tool-input-start",
        "tool-input-available",
        "tool-output-available",
        "finish-step",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    second = model.requests[1].turns
    assert second[-2].tool_calls == (call,)
    assert second[-1].role == "tool" and "25 days of leave" in second[-1].content
    kinds = [p["type"] for p in world.runs.parts["run-1"]]
    assert kinds == ["source-document", "tool-invocation", "tool-result", "text"]
    assert len(world.ledger.entries) == 2


async def test_an_unknown_tool_is_reported_to_the_model_as_an_error():
    call = ToolCall(id="c1", name="delete_everything", arguments={})
    model = ScriptedChatModel(
        [ToolCallRequested(call), Finished("tool-calls")],
        text_script("Sorry."),
        supports_tools=True,
    )
    world = World(model)
    await world.run()
    errors = [c for c in world.writer.chunks if c["type"] == "tool-output-error"]
    assert errors == [
        {
            "type": "tool-output-error",
            "toolCallId": "c1",
            "errorText": "There is no tool named 'delete_everything'.",
        }
    ]
    assert world.runs.status["run-1"] is StreamStatus.COMPLETED


async def test_skills_are_offered_and_loaded_by_name():
    call = ToolCall(id="c1", name="load_skill", arguments={"name": "tone"})
    model = ScriptedChatModel(
        [ToolCallRequested(call), Finished("tool-calls")], text_script("Done."), supports_tools=True
    )
    world = World(model)
    await world.run(command(agent(skill_ids=[3])))
    assert "<name>tone</name>" in model.requests[0].turns[0].content
    output = next(c for c in world.writer.chunks if c["type"] == "tool-output-available")
    assert output["output"] == {"name": "tone", "files": [], "instructions": "# Tone\nBe kind."}


async def test_a_model_failure_mid_stream_keeps_the_text_and_ends_with_an_error_chunk():
    model = ScriptedChatModel(
        [TextDelta("Partial "), TextDelta("answer"), ChatModelError("The model timed out.")]
    )
    world = World(model)
    await world.run()
    assert world.writer.types[-4:] == ["text-delta", "text-end", "error", "finish"]
    assert world.writer.chunks[-2] == {"type": "error", "errorText": "The model timed out."}
    assert world.runs.status["run-1"] is StreamStatus.FAILED
    assert world.runs.errors["run-1"] == "The model timed out."
    # The message keeps the text and says why it ended.
    assert world.runs.parts["run-1"] == [
        {"type": "text", "text": "Partial answer"},
        {"type": "data-error", "data": {"errorText": "The model timed out."}},
    ]
    assert model.closed == 1
    (entry,) = world.ledger.entries
    assert entry.estimated


async def test_an_unexpected_failure_does_not_leak_its_detail():
    world = World(ScriptedChatModel([RuntimeError("password=hunter2")]))
    await world.run()
    assert world.writer.chunks[-2:] == [
        {"type": "error", "errorText": FAILED_UNEXPECTEDLY},
        {"type": "finish"},
    ]
    assert world.runs.status["run-1"] is StreamStatus.FAILED


async def test_an_unavailable_model_fails_the_response_with_its_message():
    world = World(ScriptedChatModel())
    await world.run(command(agent(model="bogus:model")))
    assert world.writer.types[-2:] == ["error", "finish"]
    assert "bogus:model" in world.writer.chunks[-2]["errorText"]
    assert world.runs.status["run-1"] is StreamStatus.FAILED


async def test_a_cancel_seen_when_storing_stops_the_answer(monkeypatch):
    monkeypatch.setattr(module, "FLUSH_INTERVAL", 0.0)
    model = ScriptedChatModel([TextDelta("one "), 0.01, TextDelta("two "), 0.01, TextDelta("x")])
    world = World(model)
    world.runs.cancel_requested.add("run-1")
    await world.run()
    assert world.writer.types[-2:] == ["text-end", "abort"]
    assert world.runs.status["run-1"] is StreamStatus.CANCELLED
    assert world.runs.parts["run-1"] == [{"type": "text", "text": "one "}]
    assert model.closed == 1


async def test_a_cancel_delivered_to_the_task_ends_the_answer_cancelled():
    model = ScriptedChatModel([TextDelta("slow "), 30.0, TextDelta("never")])
    world = World(model)
    task = asyncio.create_task(world.run())
    await asyncio.sleep(0.05)
    task.cancel(CANCEL_REQUESTED)
    await task
    assert world.runs.status["run-1"] is StreamStatus.CANCELLED
    assert world.writer.types[-1] == "abort"
    assert world.writer.closed


async def test_a_shutdown_ends_the_answer_failed_with_a_message():
    model = ScriptedChatModel([TextDelta("slow "), 30.0])
    world = World(model)
    task = asyncio.create_task(world.run())
    await asyncio.sleep(0.05)
    task.cancel("shutdown")
    await task
    assert world.runs.status["run-1"] is StreamStatus.FAILED
    assert world.runs.errors["run-1"] == STOPPED_BY_SHUTDOWN
    assert world.writer.chunks[-2:] == [
        {"type": "error", "errorText": STOPPED_BY_SHUTDOWN},
        {"type": "finish"},
    ]


async def test_the_heartbeat_notices_a_cancel_asked_for_elsewhere(monkeypatch):
    monkeypatch.setattr(module, "HEARTBEAT_INTERVAL", 0.02)
    model = ScriptedChatModel([TextDelta("thinking "), 30.0])
    world = World(model)
    task = asyncio.create_task(world.run())
    await asyncio.sleep(0.05)
    world.runs.cancel_requested.add("run-1")
    await asyncio.wait_for(task, 5)
    assert world.runs.status["run-1"] is StreamStatus.CANCELLED


async def test_the_heartbeat_stores_what_a_model_said_before_it_fell_silent(monkeypatch):
    monkeypatch.setattr(module, "HEARTBEAT_INTERVAL", 0.05)
    model = ScriptedChatModel([TextDelta("first words "), 30.0])
    world = World(model)
    task = asyncio.create_task(world.run())
    await asyncio.sleep(0.01)
    assert world.runs.parts.get("run-1", []) == []
    await asyncio.sleep(0.1)
    # Stored though no later word came to trigger a flush: a process killed now loses nothing.
    assert world.runs.parts["run-1"] == [{"type": "text", "text": "first words "}]
    task.cancel(CANCEL_REQUESTED)
    await task
    assert world.runs.status["run-1"] is StreamStatus.CANCELLED


@pytest.mark.parametrize("steps", [module.MAX_STEPS])
async def test_a_model_that_keeps_calling_tools_is_made_to_answer(steps):
    call = ToolCall(id="c", name="search_knowledge_base", arguments={"query": "q"})
    loops = [[ToolCallRequested(call), Finished("tool-calls")] for _ in range(steps)]
    model = ScriptedChatModel(*loops, text_script("Final."), supports_tools=True)
    world = World(model, [passage(1)])
    await world.run(command(agent(knowledge_base_ids=[1])))
    assert len(model.requests) == steps + 1
    assert not model.requests[-1].tools
    assert world.runs.parts["run-1"][-1] == {"type": "text", "text": "Final."}
    assert world.runs.status["run-1"] is StreamStatus.COMPLETED


class NoteTool:
    """A tool the loop has never heard of: it repeats its argument, cites a passage, and
    refuses an empty note."""

    def __init__(self, source: SearchResult) -> None:
        self.source = source
        self.contexts: list[ToolContext] = []

    async def offer(self, caller: Caller, the_agent: Agent) -> ToolOffer | None:
        return ToolOffer(
            spec=ToolSpec(name="take_note", description="Take a note.", parameters={}),
            execute=self.execute,
            instructions="Take notes with take_note.",
        )

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.contexts.append(context)
        if not arguments.get("note"):
            raise ToolFailed("Nothing to note.")
        context.cite([self.source])
        return {"noted": arguments["note"]}


async def test_a_registered_tool_streams_its_call_result_and_sources_like_the_others():
    call = ToolCall(id="c9", name="take_note", arguments={"note": "x" * 40_000})
    model = ScriptedChatModel(
        [ToolCallRequested(call), Finished("tool-calls")],
        text_script("Noted."),
        supports_tools=True,
    )
    tool = NoteTool(passage(5))
    world = World(model, more_tools=[tool])
    await world.run(command(agent(skill_ids=[3])))
    first = model.requests[0]
    assert [t.name for t in first.tools] == ["load_skill", "take_note"]
    system = first.turns[0].content
    assert system.index("<name>tone</name>") < system.index("Take notes with take_note.")
    assert world.writer.types == [
        "start",
        "start-step",
        "tool-input-start",
        "tool-input-available",
        "tool-output-available",
        "source-document",
        "finish-step",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    (context,) = tool.contexts
    assert (context.caller, context.agent.skill_ids) == (CALLER, [3])
    parts = world.runs.parts["run-1"]
    assert [p["type"] for p in parts] == [
        "tool-invocation",
        "tool-result",
        "source-document",
        "text",
    ]
    assert parts[1]["result"] == {"noted": "x" * 40_000}
    answer = model.requests[1].turns[-1]
    assert answer.role == "tool" and answer.tool_call_id == "c9"
    assert len(answer.content) == TOOL_RESULT_CHARS


async def test_a_refused_call_streams_an_error_and_cites_nothing():
    call = ToolCall(id="c9", name="take_note", arguments={})
    model = ScriptedChatModel(
        [ToolCallRequested(call), Finished("tool-calls")], text_script("Hm."), supports_tools=True
    )
    world = World(model, more_tools=[NoteTool(passage(5))])
    await world.run()
    assert "source-document" not in world.writer.types
    assert world.runs.parts["run-1"][1] == {
        "type": "tool-result",
        "toolCallId": "c9",
        "toolName": "take_note",
        "isError": True,
        "result": "Nothing to note.",
    }
    assert model.requests[1].turns[-1].content == "Nothing to note."


async def test_a_model_without_tools_is_offered_none_and_skills_are_not_listed():
    model = ScriptedChatModel(text_script("ok"))
    tool = NoteTool(passage(5))
    world = World(model, more_tools=[tool])
    await world.run(command(agent(skill_ids=[3], knowledge_base_ids=[1])))
    (request,) = model.requests
    assert not request.tools
    assert "tone" not in request.turns[0].content
    assert "take_note" not in request.turns[0].content


async def test_a_model_without_tools_gets_the_matching_skill_in_its_instructions():
    model = ScriptedChatModel(text_script("ok"))
    world = World(model)
    world.skills.skills[4] = FakeSkill(
        id=4, name="leave-policy", description="Answer questions on leave", body="Say 25 days."
    )
    history = [message("user", "How does the leave policy work?")]
    await world.run(command(agent(skill_ids=[3, 4]), history))
    (request,) = model.requests
    assert not request.tools
    system = request.turns[0].content
    assert system.endswith('<skill_content name="leave-policy">\nSay 25 days.\n</skill_content>')
    assert "instructions of its own" in system and "not from the member" in system
    assert "Be kind." not in system and "load_skill" not in system
    assert [t.role for t in request.turns] == ["system", "user"]


class UnreachableEmbeddings(FakeKnowledgeSearch):
    async def search(
        self,
        caller: Caller,
        kb_ids: list[int],
        query: str,
        top_k: int,
        *,
        filters: Filter | None = None,
    ) -> list[SearchResult]:
        raise EmbeddingFailed("No API key is configured for OpenAI embeddings.")


async def test_a_knowledge_base_that_cannot_be_searched_fails_the_answer_with_why():
    world = World(ScriptedChatModel(text_script("Never.")), search=UnreachableEmbeddings())
    await world.run(command(agent(knowledge_base_ids=[1])))
    message = (
        "The knowledge base's embedding model is unavailable: "
        "No API key is configured for OpenAI embeddings."
    )
    assert world.writer.chunks[-2:] == [{"type": "error", "errorText": message}, {"type": "finish"}]
    assert world.runs.status["run-1"] is StreamStatus.FAILED
    assert world.model.requests == []


async def admitted(world: World) -> Reservation:
    """The reservation `SendChatMessage` makes before it stores the message."""
    return await world.use_case._meter.reserve(
        MeteredCall(
            org_id=CALLER.org_id,
            user_id=CALLER.user_id,
            thread_id="t1",
            purpose=UsagePurpose.CHAT,
            model="openai:gpt-4o-mini",
        ),
        input_tokens=128_000,
        output_tokens=1024,
    )


async def test_the_first_call_uses_the_admission_resized_to_its_prompt_then_settles_it():
    world = World(ScriptedChatModel(text_script("Twenty-five days.")))
    world.ledger.caps = {CapPeriod.MONTHLY: Decimal(100)}
    admission = await admitted(world)
    worst = world.ledger.reserved[admission.id]
    resized: list[Decimal] = []
    prompts: list[int] = []
    original = world.ledger.resize

    async def spy(org_id: str, reservation_id: str, amount: Decimal, **kwargs) -> None:
        resized.append(amount)
        prompts.append(kwargs["prompt_tokens"])
        await original(org_id, reservation_id, amount, **kwargs)

    world.ledger.resize = spy  # type: ignore[method-assign]
    await world.run(dataclasses.replace(command(), admission=admission))
    assert len(resized) == 1 and 0 < resized[0] < worst
    # The prompt's estimate, which the reaper would charge if the process died.
    assert prompts[0] > 0
    assert world.ledger.settled == [admission.id] and world.ledger.reserved == {}
    assert world.runs.status["run-1"] is StreamStatus.COMPLETED


async def test_a_tool_loop_step_refused_at_a_cap_fails_the_answer_and_keeps_the_first_charge():
    call = ToolCall(id="call_1", name="search_knowledge_base", arguments={"query": "leave"})
    model = ScriptedChatModel(
        [ToolCallRequested(call), Usage(10, 5), Finished("tool-calls")],
        text_script("never sent"),
        supports_tools=True,
    )
    world = World(model, [passage(11)])
    admission = await admitted(world)
    world.ledger.caps = {CapPeriod.DAILY: Decimal(0)}
    await world.run(
        dataclasses.replace(command(agent(knowledge_base_ids=[1])), admission=admission)
    )
    assert len(model.requests) == 1
    assert world.runs.status["run-1"] is StreamStatus.FAILED
    error = world.writer.chunks[-2]
    assert error["type"] == "error"
    assert error["errorText"].startswith("Spend cap reached: the daily cap of $0.00")
    (entry,) = world.ledger.entries
    assert (entry.input_tokens, entry.output_tokens) == (10, 5)
    assert world.ledger.reserved == {}


async def test_an_answer_that_fails_before_calling_the_model_releases_its_admission():
    world = World(ScriptedChatModel(text_script("Never.")), search=UnreachableEmbeddings())
    admission = await admitted(world)
    await world.run(
        dataclasses.replace(command(agent(knowledge_base_ids=[1])), admission=admission)
    )
    assert world.ledger.released == [admission.id] and world.ledger.reserved == {}
    assert world.ledger.entries == []


async def test_an_answer_cut_again_while_recording_its_ending_still_records_it_and_its_usage():
    model = ScriptedChatModel([TextDelta("slow "), 30.0])
    world = World(model)
    finish = world.runs.finish

    async def slow_finish(*args, **kwargs):
        await asyncio.sleep(0.1)
        await finish(*args, **kwargs)

    world.runs.finish = slow_finish
    task = asyncio.create_task(world.run())
    await asyncio.sleep(0.05)
    task.cancel("shutdown")
    await asyncio.sleep(0.02)
    # A second cut, as the app's own shutdown after the drain would deliver.
    task.cancel("shutdown")
    await task
    assert world.runs.errors["run-1"] == STOPPED_BY_SHUTDOWN
    assert STOPPED_BY_SHUTDOWN == "The service was restarted"
    (entry,) = world.ledger.entries
    assert entry.estimated and entry.output_tokens > 0
