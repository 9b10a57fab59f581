from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from application.metering import MeteredCall, SpendMeter, request_texts
from application.ports.agent_repository import AgentRepository
from application.ports.chat_model import (
    ChatModel,
    ChatModelError,
    ChatModelRegistry,
    ChatRequest,
    ChatTurn,
    TextDelta,
    Usage,
)
from application.ports.conversation_repository import ConversationRepository
from application.ports.unit_of_work import UnitOfWork
from domain.agents import DEFAULT_CHAT_MODEL, Agent
from domain.conversations import (
    Conversation,
    StoredMessage,
    TitleSource,
    clean_generated_title,
    validate_title,
)
from domain.errors import Invalid
from domain.spend import SpendCapReached
from domain.usage import UsagePurpose

log = logging.getLogger(__name__)

MAX_OUTPUT_TOKENS = 24
TEMPERATURE = 0.2
AGENT_FIELD_CHARS = 500
MESSAGE_CHARS = 2000
MAX_FILE_NAMES = 10
FILE_NAME_CHARS = 120
MODEL_TIMEOUT = 60.0
INSTRUCTION = (
    "You name chat conversations. Read the first message of a conversation and reply with a "
    "short, specific title for it: 2 to 6 words, in the language of the message. Reply with "
    "the title alone, on one line, without quotes, a label or final punctuation."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerateConversationTitleCommand:
    org_id: str
    thread_id: str
    title_version: int


class GenerateConversationTitle:
    """Name a new conversation in the background (agent-platform-api.md §4.13, title rules 2 and 3).

    Rules: only a conversation whose title is still the `fallback` at the version the job was
    queued with is named; a rename (even one clearing the title) moves the version, so a
    rename before or during generation wins, and the save itself only replaces the fallback
    at that version. The deployment's default chat model is asked, with a fixed instruction,
    about the first user message's text and attachment file names and a bounded description
    of the agent (name, description, role, at most 500 characters each). The answer is
    cleaned (first line, no Markdown, quotes or label, at most 80 characters) and must pass
    the title rules; otherwise the fallback stays. A model that fails, is unavailable or
    takes longer than a minute leaves the fallback too: the failure is logged and the job
    ends without error, so it is not retried; so does a call refused at a spend cap. The
    call reserves its worst case against the caps and settles to its tokens and cost in the
    usage ledger (purpose `title`; see `SpendMeter`). Any other error propagates, so that the
    queue retries.
    """

    def __init__(
        self,
        conversations: ConversationRepository,
        agents: AgentRepository,
        models: ChatModelRegistry,
        meter: SpendMeter,
        uow: UnitOfWork,
        default_chat_model: str = DEFAULT_CHAT_MODEL,
        timeout: float = MODEL_TIMEOUT,
    ) -> None:
        self._conversations = conversations
        self._agents = agents
        self._models = models
        self._meter = meter
        self._uow = uow
        self._model = default_chat_model
        self._timeout = timeout

    async def execute(self, command: GenerateConversationTitleCommand) -> str | None:
        """The title saved, or None when the conversation keeps the title it has."""
        org_id, thread_id = command.org_id, command.thread_id
        conversation = await self._conversations.get(org_id, thread_id)
        if not self._still_fallback(conversation, command.title_version):
            return None
        assert conversation is not None
        first = await self._conversations.first_user_message(org_id, thread_id)
        text, file_names = _content(first)
        if not text and not file_names:
            return None
        agent = (
            await self._agents.get(org_id, conversation.agent_id)
            if conversation.agent_id is not None
            else None
        )
        turns = [
            ChatTurn(role="system", content=_system_prompt(agent)),
            ChatTurn(role="user", content=_user_prompt(text, file_names)),
        ]
        try:
            answer = await self._ask(conversation, turns)
        except (ChatModelError, SpendCapReached) as error:
            log.warning(
                "title generation for %s failed, the fallback title stays: %s",
                thread_id,
                error.message,
            )
            return None
        cleaned = clean_generated_title(answer)
        try:
            title = validate_title(cleaned)
        except Invalid:
            log.info("title generation for %s gave no usable title: %r", thread_id, answer[:200])
            return None
        saved = await self._conversations.set_generated_title(
            org_id, thread_id, title, command.title_version
        )
        await self._uow.commit()
        return title if saved else None

    @staticmethod
    def _still_fallback(conversation: Conversation | None, version: int) -> bool:
        return (
            conversation is not None
            and conversation.title_source is TitleSource.FALLBACK
            and conversation.title_version == version
        )

    async def _ask(self, conversation: Conversation, turns: list[ChatTurn]) -> str:
        model: ChatModel = self._models.get(self._model)
        request = ChatRequest(
            model=self._model.partition(":")[2],
            turns=turns,
            max_output_tokens=MAX_OUTPUT_TOKENS,
            temperature=TEMPERATURE,
        )
        reservation = await self._meter.reserve_request(
            MeteredCall(
                org_id=conversation.org_id,
                user_id=conversation.user_id,
                thread_id=conversation.thread_id,
                purpose=UsagePurpose.TITLE,
                model=self._model,
            ),
            request,
            model.info.context_tokens,
        )
        text: list[str] = []
        usage: Usage | None = None
        events = model.stream(request)
        try:
            async with asyncio.timeout(self._timeout):
                async for event in events:
                    if isinstance(event, TextDelta):
                        text.append(event.text)
                    elif isinstance(event, Usage):
                        usage = event
        except TimeoutError:
            raise ChatModelError(f"no answer within {self._timeout:g} s") from None
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()
            await self._meter.finish(
                reservation, prompt=request_texts(request), answer="".join(text), usage=usage
            )
        return "".join(text)


def _bounded(text: str, limit: int, *, one_line: bool = True) -> str:
    text = " ".join(text.split()) if one_line else text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _content(message: StoredMessage | None) -> tuple[str, list[str]]:
    if message is None:
        return "", []
    texts = [str(part.get("text") or "") for part in message.parts if part.get("type") == "text"]
    names = [
        str(part.get("filename") or "")
        for part in message.parts
        if part.get("type") == "file" and part.get("filename")
    ]
    return "\n\n".join(t for t in texts if t.strip()).strip(), names


def _system_prompt(agent: Agent | None) -> str:
    if agent is None:
        return INSTRUCTION
    lines = [INSTRUCTION, "", "The conversation is with this assistant:"]
    lines.append(f"Name: {_bounded(agent.name, AGENT_FIELD_CHARS)}")
    if agent.description.strip():
        lines.append(f"Description: {_bounded(agent.description, AGENT_FIELD_CHARS)}")
    if agent.role.strip():
        lines.append(f"Its instructions: {_bounded(agent.role, AGENT_FIELD_CHARS)}")
    return "\n".join(lines)


def _user_prompt(text: str, file_names: list[str]) -> str:
    parts: list[str] = []
    if text:
        parts.append(_bounded(text, MESSAGE_CHARS, one_line=False))
    if file_names:
        names = [_bounded(name, FILE_NAME_CHARS) for name in file_names[:MAX_FILE_NAMES]]
        parts.append("Attached files: " + ", ".join(names))
    return "First message of the conversation:\n\n" + "\n\n".join(parts) + "\n\nTitle:"
