from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from application.agent.approvals import decide_calls, message_turns
from application.agent.inline_skills import InlineSkills
from application.agent.progress import Progress
from application.agent.prompt import latest_user_text, prompt_turns, search_passages
from application.agent.tool_calls import (
    ApprovalTerms,
    ask_approval,
    distinct_ids,
    run_tool_call,
)
from application.metering import MeteredCall, Reservation, SpendMeter, request_texts
from application.ports.background_tasks import CANCEL_REQUESTED
from application.ports.chat_model import (
    DEFAULT_MAX_OUTPUT_TOKENS,
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
from application.ports.clock import Clock
from application.ports.embedder import EmbeddingFailed
from application.ports.knowledge_search import KnowledgeSearch
from application.tools.registry import Toolbox, ToolRegistry
from domain import chat_stream
from domain.agents import Agent
from domain.conversations import StoredMessage, StreamStatus
from domain.identity import Caller
from domain.spend import SpendCapReached, estimated_tokens
from domain.tool_approvals import DEFAULT_APPROVAL_TTL, ENDED_REASON, close_pending
from domain.usage import UsagePurpose

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_STEPS = 5
FLUSH_INTERVAL = 0.15
HEARTBEAT_INTERVAL = 10.0
FAILED_UNEXPECTEDLY = "The response failed unexpectedly. Please try again."
# The contract's words for an answer cut by a shutdown (`CONTRACT.md`, "Shutdown and usage").
STOPPED_BY_SHUTDOWN = "The service was restarted"


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerateChatResponseCommand:
    caller: Caller
    thread_id: str
    run_id: str
    message_id: str
    agent: Agent
    history: list[StoredMessage]
    admission: Reservation | None = None
    resume: StoredMessage | None = None
    """The answer (message `message_id`) paused for approvals, its decisions in its parts:
    this run makes or denies the decided calls and goes on from there."""


class _CancelRequested(Exception):
    pass


class GenerateChatResponse:
    """Produce an agent's answer to the latest message of a conversation, in the background.

    Rules: the answer streams as UI message chunks (`start`, then per model call `start-step`,
    the text, the knowledge-base sources and tool calls, `finish-step`; then `finish`) to live
    readers at once, and is stored as it goes (chunks and message parts, every ~150 ms), so a
    reader can resume it and nothing produced is lost. The agent's knowledge bases are searched
    for the member's message first and the best passages go into the instructions, cited as
    sources; models that take tools also get the tools of the registry that apply to the agent
    (knowledge search, skill loading, ...), whose calls run between model calls. Tools are
    offered to at most five model calls; a model still asking for them then answers without.
    A model that takes no tools gets instead, in its instructions, the agent's skills that best
    match the member's message (`InlineSkills`).
    A call of a tool that needs approval is not made: the step's other calls are, then the
    answer ends `awaiting_approval` with a `tool-approval-request` per such call (each expiring
    after `approval_ttl` seconds). Once the member has decided, the answer continues in a new
    run of the same message (`resume`): the decisions stream first, then the approved calls'
    results and the denied calls' `tool-output-denied`, and the model goes on at the next step.
    An answer that ends otherwise (cancelled, failed) closes the calls it asked approval for,
    as not made, in its parts.
    Every model call reserves its worst case against the spend caps before it starts (the
    first one uses `admission`, reserved when the message was accepted, resized to the real
    prompt) and settles to its tokens and cost in the usage ledger once the answer ends; a
    later step refused at a cap fails the answer with "Spend cap reached". A cancel (from this
    process or another, seen at the next store or heartbeat) ends the answer `cancelled`; a
    model failure ends it `failed` with an `error` chunk; either way what was produced is kept.
    """

    def __init__(
        self,
        models: ChatModelRegistry,
        runs: ChatRunLog,
        search: KnowledgeSearch,
        tools: ToolRegistry,
        inline_skills: InlineSkills,
        meter: SpendMeter,
        max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS,
        *,
        approval_ttl: float = DEFAULT_APPROVAL_TTL,
        clock: Clock | None = None,
    ) -> None:
        self._models = models
        self._runs = runs
        self._search = search
        self._tools = tools
        self._inline_skills = inline_skills
        self._meter = meter
        self.max_output_tokens = max_output_tokens
        """The output limit of each model call of an answer."""
        self._approval_ttl = timedelta(seconds=approval_ttl)
        self._clock = clock

    async def execute(self, command: GenerateChatResponseCommand, writer: ChatStreamWriter) -> None:
        progress = Progress(writer)
        if command.resume is not None:
            progress.parts = copy.deepcopy(command.resume.parts)
            progress.cited = {
                str(part.get("sourceId"))
                for part in progress.parts
                if part.get("type") == "source-document"
            }
        heartbeat = asyncio.create_task(self._heartbeat(command, progress, asyncio.current_task()))
        status = StreamStatus.COMPLETED
        error: str | None = None
        try:
            progress.emit(chat_stream.start(command.message_id))
            if await self._answer(command, progress):
                status = StreamStatus.AWAITING_APPROVAL
                # Stored before readers get it: a reader that sees the answer end can decide.
                progress.pending.append(chat_stream.finish())
            else:
                progress.emit(chat_stream.finish())
        except (_CancelRequested, asyncio.CancelledError) as stop:
            progress.end_text()
            if isinstance(stop, asyncio.CancelledError) and stop.args[:1] != (CANCEL_REQUESTED,):
                status, error = StreamStatus.FAILED, STOPPED_BY_SHUTDOWN
                progress.fail(error)
            else:
                status = StreamStatus.CANCELLED
                progress.emit(chat_stream.abort())
        except ChatModelError as failure:
            progress.end_text()
            status, error = StreamStatus.FAILED, failure.message
            progress.fail(failure.message)
        except SpendCapReached as refused:
            progress.end_text()
            status, error = StreamStatus.FAILED, refused.explanation
            progress.fail(error)
        except EmbeddingFailed as failure:
            progress.end_text()
            status = StreamStatus.FAILED
            error = f"The knowledge base's embedding model is unavailable: {failure.message}"
            progress.fail(error)
        except Exception:
            log.exception("chat response %s failed", command.run_id)
            progress.end_text()
            status, error = StreamStatus.FAILED, FAILED_UNEXPECTEDLY
            progress.fail(FAILED_UNEXPECTEDLY)
        if status is not StreamStatus.AWAITING_APPROVAL:
            close_pending(progress.parts, ENDED_REASON)
        await _to_the_end(self._record(command, progress, writer, heartbeat, (status, error)))

    async def _record(
        self,
        command: GenerateChatResponseCommand,
        progress: Progress,
        writer: ChatStreamWriter,
        heartbeat: asyncio.Task[None],
        ending: tuple[StreamStatus, str | None],
    ) -> None:
        """Store the answer's ending, then settle every model call's usage."""
        status, error = ending
        # Not while it stores what a silent model produced: that would cut the store short.
        async with progress.flushing:
            heartbeat.cancel()
        try:
            await self._runs.finish(
                command.caller.org_id,
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
            if status is StreamStatus.AWAITING_APPROVAL:
                writer.emit(chat_stream.finish())
            writer.close()
        # Settled once the reader has the whole answer, so that the ledger adds no latency.
        if command.admission is not None and not progress.calls:
            await self._meter.release(command.admission)
        for reservation, prompt, answer, usage in progress.calls:
            await self._meter.finish(reservation, prompt=prompt, answer=answer, usage=usage)

    async def _heartbeat(
        self, command: GenerateChatResponseCommand, progress: Progress, main: Any
    ) -> None:
        """Keeps the run alive while the model is silent, stores what it produced before it
        fell silent, and notices a cancel asked for elsewhere."""
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL)
            try:
                await self._flush(command, progress)
                cancel = await self._runs.heartbeat(command.caller.org_id, command.run_id)
            except _CancelRequested:
                cancel = True
            except Exception:
                log.warning("chat response %s: heartbeat failed", command.run_id, exc_info=True)
                continue
            if cancel and main is not None:
                main.cancel(CANCEL_REQUESTED)
                return

    async def _flush(self, command: GenerateChatResponseCommand, progress: Progress) -> None:
        async with progress.flushing:
            if not progress.pending:
                return
            taken = len(progress.pending)
            chunks = chat_stream.compact(progress.pending[:taken])
            appending = asyncio.ensure_future(
                self._runs.append(
                    command.caller.org_id,
                    command.run_id,
                    first_seq=progress.next_seq,
                    chunks=chunks,
                    parts=progress.parts,
                )
            )
            try:
                cancel = await asyncio.shield(appending)
            except asyncio.CancelledError:
                # Cut (a shutdown) while storing: the store ends, and the answer's ending is
                # written after what it stored, not over it.
                with contextlib.suppress(Exception):
                    await _to_the_end(appending)
                    del progress.pending[:taken]
                    progress.next_seq += len(chunks)
                raise
            del progress.pending[:taken]
            progress.next_seq += len(chunks)
            progress.last_flush = time.monotonic()
        if cancel:
            raise _CancelRequested

    async def _maybe_flush(self, command: GenerateChatResponseCommand, progress: Progress) -> None:
        if time.monotonic() - progress.last_flush >= FLUSH_INTERVAL:
            await self._flush(command, progress)

    async def _answer(self, command: GenerateChatResponseCommand, progress: Progress) -> bool:
        """The answer's steps; True when it paused for approvals."""
        caller, agent, history = command.caller, command.agent, command.history
        model = self._models.get(agent.model)
        toolbox = Toolbox()
        if model.info.supports_tools:
            toolbox = await self._tools.offer(caller, agent)
            sections = toolbox.instructions
        else:
            message = latest_user_text(history)
            skills = await self._inline_skills.instructions(caller, agent, message)
            sections = [skills] if skills else []
        first = 0
        if command.resume is not None:
            # The decided calls first: what follows may fail, and they are already promised.
            first = await decide_calls(
                toolbox, caller, agent, progress, thread_id=command.thread_id
            )
            history = [message for message in history if message.id != command.resume.id]
            toolbox.reveal(
                p["toolName"] for p in progress.parts if p.get("type") == "tool-invocation"
            )
        passages = await search_passages(self._search, caller, agent, history)
        turns = prompt_turns(agent, history, passages, sections)
        turns.extend(message_turns(progress.parts))
        for step in range(first, MAX_STEPS):
            progress.emit(chat_stream.start_step())
            calls, text = await self._call(command, progress, model, turns, toolbox.specs)
            progress.end_text()
            if step == 0:
                progress.cite(passages)
            if not calls:
                progress.emit(chat_stream.finish_step())
                return False
            calls = distinct_ids(calls, progress.parts)
            turns.append(ChatTurn(role="assistant", content=text, tool_calls=tuple(calls)))
            waiting: list[ToolCall] = []
            for call in calls:
                turn = await run_tool_call(
                    toolbox, call, caller, agent, progress, thread_id=command.thread_id
                )
                if turn is None:
                    waiting.append(call)
                else:
                    turns.append(turn)
            terms = ApprovalTerms(expires_at=self._now() + self._approval_ttl, step=step)
            for call in waiting:
                ask_approval(progress, call, terms)
            progress.emit(chat_stream.finish_step())
            await self._flush(command, progress)
            if waiting:
                return True
        # The step budget is spent and the model still asked for tools: answer without them.
        progress.emit(chat_stream.start_step())
        await self._call(command, progress, model, turns, ())
        progress.end_text()
        progress.emit(chat_stream.finish_step())
        return False

    def _now(self) -> datetime:
        return self._clock.now() if self._clock is not None else datetime.now(UTC)

    async def _call(
        self,
        command: GenerateChatResponseCommand,
        progress: Progress,
        model: ChatModel,
        turns: Sequence[ChatTurn],
        tools: Sequence[ToolSpec],
    ) -> tuple[list[ToolCall], str]:
        request = ChatRequest(
            model=command.agent.model.partition(":")[2],
            turns=turns,
            tools=tools,
            max_output_tokens=self.max_output_tokens,
        )
        reservation = await self._reserve(command, progress, model, request)
        calls: list[ToolCall] = []
        text: list[str] = []
        usage: Usage | None = None
        events = model.stream(request)
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
            answer = "".join(text) + "".join(json.dumps(call.arguments) for call in calls)
            progress.calls.append((reservation, request_texts(request), answer, usage))
        return calls, "".join(text)

    async def _reserve(
        self,
        command: GenerateChatResponseCommand,
        progress: Progress,
        model: ChatModel,
        request: ChatRequest,
    ) -> Reservation:
        context = model.info.context_tokens
        if command.admission is not None and not progress.calls:
            texts = request_texts(request)
            input_tokens, output_tokens = self._meter.worst_case(
                command.agent.model, texts, request.max_output_tokens, context
            )
            await self._meter.resize(
                command.admission,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                prompt_tokens=sum(estimated_tokens(text) for text in texts),
            )
            return command.admission
        call = MeteredCall(
            org_id=command.caller.org_id,
            user_id=command.caller.user_id,
            thread_id=command.thread_id,
            purpose=UsagePurpose.CHAT,
            model=command.agent.model,
            run_id=command.run_id,
        )
        stored = sum(len(part["text"]) for part in progress.parts if part.get("type") == "text")
        return await self._meter.reserve_request(call, request, context, text_offset=stored)


async def _to_the_end(work: Awaitable[T]) -> T:
    """Run `work` to its end even when the task is cancelled meanwhile (a shutdown cutting
    the answers as it records one): an answer's ending and its usage are always recorded."""
    future = asyncio.ensure_future(work)
    while not future.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(future)
    return future.result()
