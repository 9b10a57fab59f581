from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass

from application.metering import MeteredCall, Reservation, SpendMeter
from application.ports.agent_repository import AgentRepository
from application.ports.background_tasks import BackgroundTasks
from application.ports.chat_model import ChatModelError, ChatModelRegistry
from application.ports.chat_streams import ChatStreams
from application.ports.conversation_repository import ConversationRepository
from application.ports.job_queue import JobQueue, generate_title_job
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.generate_chat_response import (
    GenerateChatResponse,
    GenerateChatResponseCommand,
)
from domain.agents import AGENT_ID_REQUIRED, AGENT_NOT_FOUND, Agent, parse_agent_id
from domain.conversations import (
    CONVERSATION_NOT_FOUND,
    FIRST_TITLE_VERSION,
    TITLE_WITH_THREAD,
    UPSTREAM_INVALID,
    NewConversation,
    StreamStatus,
    TitleSource,
    UserMessage,
    fallback_title,
    parse_thread_id,
    validate_messages,
    validate_title,
)
from domain.errors import Conflict, Invalid, NotFound, field_error
from domain.identity import Caller
from domain.ids import parse_uuid
from domain.tool_approvals import SUPERSEDED_REASON, close_pending
from domain.usage import UsagePurpose

RESPONSE_RUNNING = "A response is still being generated in this conversation"
OTHER_AGENT = "This conversation is with another agent"


@dataclass(frozen=True, slots=True, kw_only=True)
class SendChatMessageCommand:
    caller: Caller
    agent_id: int
    message: UserMessage
    thread_id: str | None = None
    """None: a new conversation."""
    upstream_conversation_id: str | None = None
    title: str | None = None

    @classmethod
    def parse(
        cls,
        *,
        caller: Caller,
        agent_id: object,
        messages: object,
        thread_id: object = None,
        upstream_conversation_id: object = None,
        title: object = None,
    ) -> SendChatMessageCommand:
        """In this order: `messages` ends with the message being sent (`validate_messages`);
        `agentId` is required and a positive integer; `threadId`, when given, a uuid; `title`
        only without `threadId` (400) and then by the title rules; `upstreamConversationId`, when
        given, a uuid."""
        message = validate_messages(messages)
        if agent_id is None:
            raise Invalid(AGENT_ID_REQUIRED, [field_error("agentId", "required")])
        agent = parse_agent_id(agent_id)
        thread = None if thread_id is None else parse_thread_id(thread_id)
        if title is not None and thread is not None:
            raise Invalid(TITLE_WITH_THREAD, [field_error("title", TITLE_WITH_THREAD)])
        given_title = None if title is None else validate_title(title)
        upstream = upstream_conversation_id
        return cls(
            caller=caller,
            agent_id=agent,
            message=message,
            thread_id=thread,
            upstream_conversation_id=(
                None if upstream is None else parse_uuid(upstream, UPSTREAM_INVALID)
            ),
            title=given_title,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatStarted:
    """The conversation the message went to and the response now being produced."""

    thread_id: str
    run_id: str
    message_id: str
    created: bool


class SendChatMessage:
    """Send a member's message to an agent and start the agent's answer in the background.

    Rules: `agentId` must be an agent of the caller's organization (404 "Agent not found"). Without
    `threadId` a conversation is created (its id generated): a supplied `title` is kept, otherwise
    the fallback from the message is saved at once and a background job asks a model for a better
    one. With `threadId` the conversation must exist and be the caller's (404 otherwise), be with
    the same agent and have no answer still running (409); an answer waiting for approvals there
    (or cut while it asked) has its pending calls closed as not made (`close_pending`).
    `upstreamConversationId` is stored on creation. Before anything is stored, the answer's first
    model call is admitted against the organization's spend caps (`SpendCapReached` otherwise,
    nothing stored): it reserves the model's worst case (its whole context window in, its output
    limit out), which the answer resizes once its prompt is built. The message, the empty
    assistant message and the run are committed together; only then does the answer start,
    independent of the request.
    """

    def __init__(
        self,
        agents: AgentRepository,
        conversations: ConversationRepository,
        jobs: JobQueue,
        uow: UnitOfWork,
        streams: ChatStreams,
        tasks: BackgroundTasks,
        generate: GenerateChatResponse,
        meter: SpendMeter,
        models: ChatModelRegistry,
    ) -> None:
        self._agents = agents
        self._conversations = conversations
        self._jobs = jobs
        self._uow = uow
        self._streams = streams
        self._tasks = tasks
        self._generate = generate
        self._meter = meter
        self._models = models

    async def execute(self, command: SendChatMessageCommand) -> ChatStarted:
        caller, message, thread_id = command.caller, command.message, command.thread_id
        title, upstream = command.title, command.upstream_conversation_id
        agent = await self._agents.get(caller.org_id, command.agent_id)
        if agent is None:
            raise NotFound(AGENT_NOT_FOUND)

        created = thread_id is None
        thread_id = thread_id or str(uuid.uuid4())
        admission = await admit_answer(
            self._meter, self._models, self._generate, caller, agent.model, (thread_id, None)
        )
        try:
            started = await self._start(
                caller, agent, message, (thread_id, created), title, upstream, admission
            )
        except BaseException:
            await self._meter.release(admission)
            raise
        return started

    async def _start(
        self,
        caller: Caller,
        agent: Agent,
        message: UserMessage,
        thread: tuple[str, bool],
        title: str | None,
        upstream: str | None,
        admission: Reservation,
    ) -> ChatStarted:
        thread_id, created = thread
        run_id = admission.call.run_id or str(uuid.uuid4())
        message_id = str(uuid.uuid4())
        if created:
            source = TitleSource.SUPPLIED if title is not None else TitleSource.FALLBACK
            if source is TitleSource.FALLBACK:
                # Queued first, so that the job and the conversation commit together.
                await self._jobs.enqueue(
                    generate_title_job(caller.org_id, thread_id, FIRST_TITLE_VERSION)
                )
            sent = await self._conversations.start(
                NewConversation(
                    thread_id=thread_id,
                    org_id=caller.org_id,
                    user_id=caller.user_id,
                    agent_id=agent.id,
                    title=title or fallback_title(message.text, message.file_names),
                    title_source=source,
                    upstream_conversation_id=upstream,
                ),
                message_id=str(uuid.uuid4()),
                parts=message.parts,
                run_id=run_id,
                answer_id=message_id,
            )
            # A new conversation's history is the message just sent: no need to read it back.
            history = [sent]
        else:
            existing = await self._conversations.get(caller.org_id, thread_id, for_update=True)
            if existing is None or existing.user_id != caller.user_id:
                raise NotFound(CONVERSATION_NOT_FOUND)
            if existing.agent_id != agent.id:
                raise Invalid(OTHER_AGENT, [field_error("agentId", OTHER_AGENT)])
            if await self._conversations.running_run(caller.org_id, thread_id) is not None:
                raise Conflict(RESPONSE_RUNNING)
            if existing.stream_status in (StreamStatus.AWAITING_APPROVAL, StreamStatus.FAILED):
                # A failed answer may have been cut (its process died) while it asked.
                await self._set_aside_approvals(caller.org_id, thread_id)
            await self._conversations.add_message(
                caller.org_id,
                thread_id,
                message_id=str(uuid.uuid4()),
                role="user",
                parts=message.parts,
            )
            history = await self._conversations.messages(caller.org_id, thread_id)
            await self._conversations.start_run(
                caller.org_id, thread_id, run_id=run_id, message_id=message_id
            )
        await self._uow.commit()

        generation = GenerateChatResponseCommand(
            caller=caller,
            thread_id=thread_id,
            run_id=run_id,
            message_id=message_id,
            agent=agent,
            history=history,
            admission=admission,
        )
        spawn_answer(self._streams, self._tasks, self._generate, generation)
        return ChatStarted(
            thread_id=thread_id, run_id=run_id, message_id=message_id, created=created
        )

    async def _set_aside_approvals(self, org_id: str, thread_id: str) -> None:
        """The member writes instead of deciding: the paused answer's pending calls are closed
        as not made, so that the conversation reads consistently from here on."""
        run = await self._conversations.latest_run(org_id, thread_id)
        messages = await self._conversations.messages(org_id, thread_id)
        paused = next((m for m in messages if run is not None and m.id == run.message_id), None)
        if paused is None:
            return
        parts = copy.deepcopy(paused.parts)
        if close_pending(parts, SUPERSEDED_REASON):
            await self._conversations.set_message_parts(
                org_id, paused.id, parts, StreamStatus.COMPLETED
            )


async def admit_answer(
    meter: SpendMeter,
    models: ChatModelRegistry,
    generate: GenerateChatResponse,
    caller: Caller,
    model: str,
    thread: tuple[str, str | None],
    text_offset: int = 0,
) -> Reservation:
    """Admit an answer's first model call in conversation `thread` (its id, and its run's id
    or None for a new one) against the spend caps: reserve the model's worst case (its whole
    context window in, its output limit out), which the answer resizes once its prompt is
    built. The run id is known before the admission, which names it: the reaper can tell from
    the run whether a reservation left behind still has a producer. `text_offset`: the text the
    answer's message already holds (a continued answer), which the reaper does not charge."""
    thread_id, run_id = thread
    call = MeteredCall(
        org_id=caller.org_id,
        user_id=caller.user_id,
        thread_id=thread_id,
        purpose=UsagePurpose.CHAT,
        model=model,
        run_id=run_id or str(uuid.uuid4()),
    )
    try:
        context = models.get(model).info.context_tokens
    except ChatModelError:
        # The answer will fail and say why; the admission still checks the caps.
        context = 0
    return await meter.reserve(
        call,
        input_tokens=context,
        output_tokens=generate.max_output_tokens,
        text_offset=text_offset,
    )


def spawn_answer(
    streams: ChatStreams,
    tasks: BackgroundTasks,
    generate: GenerateChatResponse,
    command: GenerateChatResponseCommand,
) -> None:
    """Start producing the answer in the background, independent of the request; its live
    readers follow it through `streams`."""
    writer = streams.open(command.run_id)
    tasks.spawn("chat-response", lambda: generate.execute(command, writer), key=command.run_id)
