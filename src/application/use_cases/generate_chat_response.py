"""Long on purpose until issue 11 ("One way in") splits it: the agent loop, prompt building
and tool execution become three modules there, with a tool registry; splitting them now would
be done twice."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from application.ports.chat_launcher import CANCEL_REQUESTED
from application.ports.chat_model import (
    ChatModel,
    ChatModelError,
    ChatModelRegistry,
    ChatRequest,
    ChatTurn,
    Finished,
    TextDelta,
    ToolCall,
    ToolCallRequested,
    ToolSpec,
    Usage,
)
from application.ports.chat_run_log import ChatRunLog
from application.ports.chat_streams import ChatStreamWriter
from application.ports.knowledge_search import KnowledgeSearch
from application.ports.skill_catalog import SkillCatalog, SkillSummary
from application.ports.usage_ledger import UsageLedger
from application.use_cases.model_usage import record_model_usage
from domain import chat_stream
from domain.agents import Agent
from domain.chunks import SearchResult
from domain.conversations import StoredMessage, StreamStatus
from domain.identity import Caller
from domain.usage import PriceList, UsagePurpose

log = logging.getLogger(__name__)

MAX_STEPS = 5
MAX_HISTORY = 40
CONTEXT_PASSAGES = 4
PASSAGE_CHARS = 1200
TOOL_RESULT_CHARS = 8000
FLUSH_INTERVAL = 0.15
HEARTBEAT_INTERVAL = 10.0
DEFAULT_INSTRUCTIONS = "You are a helpful assistant."
FAILED_UNEXPECTEDLY = "The response failed unexpectedly. Please try again."
STOPPED_BY_SHUTDOWN = "The response stopped because the server shut down. Please try again."
SEARCH_TOOL = "search_knowledge_base"
SKILL_TOOL = "load_skill"


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerateChatResponseCommand:
    caller: Caller
    thread_id: str
    run_id: str
    message_id: str
    agent: Agent
    history: list[StoredMessage]


class _CancelRequested(Exception):
    pass


@dataclass(slots=True)
class _Progress:
    """What the response has produced so far: the chunks not yet stored and the message parts."""

    writer: ChatStreamWriter
    pending: list[chat_stream.Chunk] = field(default_factory=list)
    parts: list[dict[str, Any]] = field(default_factory=list)
    next_seq: int = 0
    open_text: str | None = None
    calls: list[tuple[Sequence[ChatTurn], str, Usage | None]] = field(default_factory=list)
    last_flush: float = field(default_factory=time.monotonic)

    def emit(self, chunk: chat_stream.Chunk) -> None:
        self.writer.emit(chunk)
        self.pending.append(chunk)

    def emit_all(self, chunks: list[chat_stream.Chunk]) -> None:
        for chunk in chunks:
            self.emit(chunk)

    def text(self, delta: str) -> None:
        if self.open_text is None:
            self.open_text = f"text-{uuid.uuid4().hex[:12]}"
            self.emit(chat_stream.text_start(self.open_text))
            self.parts.append({"type": "text", "text": ""})
        self.parts[-1]["text"] += delta
        self.emit(chat_stream.text_delta(self.open_text, delta))

    def end_text(self) -> None:
        if self.open_text is not None:
            self.emit(chat_stream.text_end(self.open_text))
            self.open_text = None


class GenerateChatResponse:
    """Produce an agent's answer to the latest message of a conversation, in the background.

    Rules: the answer streams as UI message chunks (`start`, then per model call `start-step`,
    the text, the knowledge-base sources and tool calls, `finish-step`; then `finish`) to live
    readers at once, and is stored as it goes (chunks and message parts, every ~150 ms), so a
    reader can resume it and nothing produced is lost. The agent's knowledge bases are searched
    for the member's message first and the best passages go into the instructions, cited as
    sources; models that take tools also get a knowledge-search tool and, when the agent has
    skills, a tool that loads a skill's SKILL.md. At most five model calls per answer. Every
    model call's tokens and cost go to the usage ledger. A cancel (from this process or another,
    seen at the next store or heartbeat) ends the answer `cancelled`; a model failure ends it
    `failed` with an `error` chunk; either way what was produced is kept.
    """

    def __init__(
        self,
        models: ChatModelRegistry,
        runs: ChatRunLog,
        search: KnowledgeSearch,
        skills: SkillCatalog,
        ledger: UsageLedger,
        prices: PriceList,
    ) -> None:
        self._models = models
        self._runs = runs
        self._search = search
        self._skills = skills
        self._ledger = ledger
        self._prices = prices

    async def execute(self, command: GenerateChatResponseCommand, writer: ChatStreamWriter) -> None:
        progress = _Progress(writer)
        org_id = command.caller.org_id
        heartbeat = asyncio.create_task(self._heartbeat(command, asyncio.current_task()))
        status = StreamStatus.COMPLETED
        error: str | None = None
        try:
            progress.emit(chat_stream.start(command.message_id))
            await self._answer(command, progress)
            progress.emit(chat_stream.finish())
        except (_CancelRequested, asyncio.CancelledError) as stop:
            progress.end_text()
            if isinstance(stop, asyncio.CancelledError) and stop.args[:1] != (CANCEL_REQUESTED,):
                status, error = StreamStatus.FAILED, STOPPED_BY_SHUTDOWN
                progress.emit_all(chat_stream.failure(error))
            else:
                status = StreamStatus.CANCELLED
                progress.emit(chat_stream.abort())
        except ChatModelError as failure:
            progress.end_text()
            status, error = StreamStatus.FAILED, failure.message
            progress.emit_all(chat_stream.failure(failure.message))
        except Exception:
            log.exception("chat response %s failed", command.run_id)
            progress.end_text()
            status, error = StreamStatus.FAILED, FAILED_UNEXPECTEDLY
            progress.emit_all(chat_stream.failure(FAILED_UNEXPECTEDLY))
        finally:
            heartbeat.cancel()
        try:
            await self._runs.finish(
                org_id,
                command.run_id,
                status=status,
                first_seq=progress.next_seq,
                chunks=chat_stream.compact(progress.pending),
                parts=progress.parts,
                error=error,
            )
        except Exception:
            log.exception("chat response %s could not be stored", command.run_id)
        finally:
            writer.close()
        # Charged once the reader has the whole answer, so that the ledger adds no latency.
        for turns, text, usage in progress.calls:
            await self._record_usage(command, turns, text, usage)

    async def _heartbeat(self, command: GenerateChatResponseCommand, main: Any) -> None:
        """Keeps the run alive while the model is silent, and notices a cancel asked for
        elsewhere."""
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL)
            try:
                cancel = await self._runs.heartbeat(command.caller.org_id, command.run_id)
            except Exception:
                log.warning("chat response %s: heartbeat failed", command.run_id, exc_info=True)
                continue
            if cancel and main is not None:
                main.cancel(CANCEL_REQUESTED)
                return

    async def _flush(self, command: GenerateChatResponseCommand, progress: _Progress) -> None:
        if not progress.pending:
            return
        chunks, progress.pending = chat_stream.compact(progress.pending), []
        cancel = await self._runs.append(
            command.caller.org_id,
            command.run_id,
            first_seq=progress.next_seq,
            chunks=chunks,
            parts=progress.parts,
        )
        progress.next_seq += len(chunks)
        progress.last_flush = time.monotonic()
        if cancel:
            raise _CancelRequested

    async def _maybe_flush(self, command: GenerateChatResponseCommand, progress: _Progress) -> None:
        if time.monotonic() - progress.last_flush >= FLUSH_INTERVAL:
            await self._flush(command, progress)

    async def _answer(self, command: GenerateChatResponseCommand, progress: _Progress) -> None:
        agent = command.agent
        model = self._models.get(agent.model)
        question = _latest_user_text(command.history)
        passages: list[SearchResult] = []
        if agent.knowledge_base_ids and question:
            passages = await self._search.search(
                command.caller, agent.knowledge_base_ids, question[:2000], CONTEXT_PASSAGES
            )
        skills: list[SkillSummary] = []
        if agent.skill_ids and model.info.supports_tools:
            skills = await self._skills.describe(command.caller.org_id, agent.skill_ids)
        tools = _tools(model, agent, skills)
        turns: list[ChatTurn] = [
            ChatTurn(role="system", content=_instructions(agent, passages, skills)),
            *_history_turns(command.history),
        ]
        cited: set[str] = set()
        for step in range(MAX_STEPS):
            progress.emit(chat_stream.start_step())
            calls, text = await self._call(command, progress, model, turns, tools, step)
            progress.end_text()
            if step == 0:
                self._cite(progress, passages, cited)
            if not calls:
                progress.emit(chat_stream.finish_step())
                return
            turns.append(ChatTurn(role="assistant", content=text, tool_calls=tuple(calls)))
            for call in calls:
                turns.append(await self._run_tool(command, progress, call, skills, cited))
            progress.emit(chat_stream.finish_step())
            await self._flush(command, progress)
        # The step budget is spent and the model still asked for tools: answer without them.
        progress.emit(chat_stream.start_step())
        await self._call(command, progress, model, turns, (), MAX_STEPS)
        progress.end_text()
        progress.emit(chat_stream.finish_step())

    async def _call(
        self,
        command: GenerateChatResponseCommand,
        progress: _Progress,
        model: ChatModel,
        turns: Sequence[ChatTurn],
        tools: Sequence[ToolSpec],
        step: int,
    ) -> tuple[list[ToolCall], str]:
        name = command.agent.model.partition(":")[2]
        calls: list[ToolCall] = []
        text: list[str] = []
        usage: Usage | None = None
        events = model.stream(ChatRequest(model=name, turns=turns, tools=tools))
        try:
            async for event in events:
                if isinstance(event, TextDelta):
                    if event.text:
                        text.append(event.text)
                        progress.text(event.text)
                        if len(text) == 1:
                            # Readers get the first words now, even when the provider's
                            # whole answer is already buffered and would be read in one go.
                            await asyncio.sleep(0)
                elif isinstance(event, ToolCallRequested):
                    calls.append(event.call)
                elif isinstance(event, Usage):
                    usage = event
                elif isinstance(event, Finished):
                    pass
                await self._maybe_flush(command, progress)
        finally:
            # Closing the stream stops the model at once (a local model's thread, an HTTP
            # response) instead of whenever the iterator is garbage-collected.
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()
            progress.calls.append((tuple(turns), "".join(text), usage))
        return calls, "".join(text)

    async def _record_usage(
        self,
        command: GenerateChatResponseCommand,
        turns: Sequence[ChatTurn],
        text: str,
        usage: Usage | None,
    ) -> None:
        await record_model_usage(
            self._ledger,
            self._prices,
            org_id=command.caller.org_id,
            user_id=command.caller.user_id,
            thread_id=command.thread_id,
            purpose=UsagePurpose.CHAT,
            model=command.agent.model,
            turns=turns,
            answer=text,
            usage=usage,
        )

    @staticmethod
    def _cite(progress: _Progress, passages: Sequence[SearchResult], cited: set[str]) -> None:
        for passage in passages:
            source_id = f"chunk-{passage.chunk_id}"
            if source_id in cited:
                continue
            cited.add(source_id)
            title = passage.file_name
            if passage.page_number is not None:
                title = f"{passage.file_name}, page {passage.page_number}"
            chunk = chat_stream.source_document(source_id, title=title, filename=passage.file_name)
            progress.emit(chunk)
            progress.parts.append({k: v for k, v in chunk.items()})

    async def _run_tool(
        self,
        command: GenerateChatResponseCommand,
        progress: _Progress,
        call: ToolCall,
        skills: Sequence[SkillSummary],
        cited: set[str],
    ) -> ChatTurn:
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
        try:
            output, passages = await self._tool_output(command, call, skills)
        except _ToolFailed as failure:
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
        self._cite(progress, passages, cited)
        return ChatTurn(
            role="tool",
            tool_call_id=call.id,
            content=json.dumps(output, ensure_ascii=False)[:TOOL_RESULT_CHARS],
        )

    async def _tool_output(
        self, command: GenerateChatResponseCommand, call: ToolCall, skills: Sequence[SkillSummary]
    ) -> tuple[Any, list[SearchResult]]:
        if call.name == SEARCH_TOOL and command.agent.knowledge_base_ids:
            query = call.arguments.get("query")
            if not isinstance(query, str) or not query.strip():
                raise _ToolFailed("The search needs a non-empty query.")
            passages = await self._search.search(
                command.caller, command.agent.knowledge_base_ids, query.strip()[:2000], 6
            )
            return [_passage(p) for p in passages], passages
        if call.name == SKILL_TOOL and skills:
            wanted = call.arguments.get("name")
            skill = next((s for s in skills if s.name == wanted), None)
            if skill is None:
                raise _ToolFailed(f"No skill named {wanted!r} is available.")
            body = await self._skills.load(command.caller.org_id, skill.id)
            if body is None:
                raise _ToolFailed(f"The skill {wanted!r} is no longer available.")
            return {"name": skill.name, "instructions": body}, []
        raise _ToolFailed(f"There is no tool named {call.name!r}.")


class _ToolFailed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _passage(result: SearchResult) -> dict[str, Any]:
    return {
        "sourceId": f"chunk-{result.chunk_id}",
        "fileName": result.file_name,
        "pageNumber": result.page_number,
        "text": result.text[:PASSAGE_CHARS],
    }


def _tools(model: ChatModel, agent: Agent, skills: Sequence[SkillSummary]) -> list[ToolSpec]:
    if not model.info.supports_tools:
        return []
    tools = []
    if agent.knowledge_base_ids:
        tools.append(
            ToolSpec(
                name=SEARCH_TOOL,
                description="Search the organization's knowledge bases for passages that "
                "answer a question. Returns passages with their file name and page.",
                parameters={
                    "type": "object",
                    "properties": {"query": {"type": "string", "description": "What to find"}},
                    "required": ["query"],
                },
            )
        )
    if skills:
        tools.append(
            ToolSpec(
                name=SKILL_TOOL,
                description="Load the full instructions of one of your skills by name.",
                parameters={
                    "type": "object",
                    "properties": {"name": {"type": "string", "enum": [s.name for s in skills]}},
                    "required": ["name"],
                },
            )
        )
    return tools


def _instructions(
    agent: Agent, passages: Sequence[SearchResult], skills: Sequence[SkillSummary]
) -> str:
    sections = [agent.role.strip() or DEFAULT_INSTRUCTIONS]
    if agent.name:
        about = f"Your name is {agent.name}."
        if agent.description:
            about += f" {agent.description.strip()}"
        sections.append(about)
    if passages:
        lines = [
            "Passages from the organization's knowledge bases that may help. Use them when "
            "they are relevant and mention the file they come from:"
        ]
        for number, passage in enumerate(passages, start=1):
            where = passage.file_name
            if passage.page_number is not None:
                where += f", page {passage.page_number}"
            lines.append(f"[{number}] ({where}) {passage.text[:PASSAGE_CHARS].strip()}")
        sections.append("\n".join(lines))
    if skills:
        listed = "\n".join(f"- {s.name}: {s.description}" for s in skills)
        sections.append(f"Skills you can load with the {SKILL_TOOL} tool when useful:\n{listed}")
    return "\n\n".join(sections)


def _latest_user_text(history: Sequence[StoredMessage]) -> str:
    for message in reversed(history):
        if message.role == "user":
            return _user_content(message)
    return ""


def _user_content(message: StoredMessage) -> str:
    lines = []
    for part in message.parts:
        if part.get("type") == "text":
            lines.append(str(part.get("text", "")))
        elif part.get("type") == "file":
            name = part.get("filename") or "unnamed file"
            lines.append(f"[Attached file: {name} ({part.get('mediaType', 'unknown type')})]")
    return "\n\n".join(line for line in lines if line)


def _history_turns(history: Sequence[StoredMessage]) -> list[ChatTurn]:
    turns: list[ChatTurn] = []
    for message in list(history)[-MAX_HISTORY:]:
        if message.role == "user":
            content = _user_content(message)
            if content:
                turns.append(ChatTurn(role="user", content=content))
        elif message.role == "assistant":
            text = "".join(
                str(p.get("text", "")) for p in message.parts if p.get("type") == "text"
            ).strip()
            if text:
                turns.append(ChatTurn(role="assistant", content=text))
    return turns
