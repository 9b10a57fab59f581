"""A fake `ConversationRepository` in memory, faithful to the Postgres one: organization
scoping, uuid ids in canonical form, activity time moved by messages and runs but not by
titles, keyset pagination, deletion of messages and runs with their conversation.

It also keeps what a test wants to look at: `cancel_requested` (run ids asked to stop) and
`runs` with their status, which a test may end with `end_run`."""

from __future__ import annotations

import copy
import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from domain.conversations import (
    CONVERSATION_NOT_FOUND,
    FIRST_TITLE_VERSION,
    ChatRun,
    Conversation,
    ConversationCursor,
    NewConversation,
    StoredMessage,
    StreamStatus,
    TitleSource,
)
from domain.errors import Conflict, NotFound

if TYPE_CHECKING:
    from application.ports.conversation_repository import ConversationRepository
    from tests.fakes.basics import Restorable

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

ConversationsState = tuple[
    dict[str, Conversation],
    list[StoredMessage],
    dict[str, str | None],
    dict[str, ChatRun],
    set[str],
    int,
]


def _canonical(value: str) -> str:
    return str(uuid.UUID(value))


class FakeConversations:
    def __init__(self) -> None:
        self.rows: dict[str, Conversation] = {}
        self.message_rows: list[StoredMessage] = []
        self.message_status: dict[str, str | None] = {}
        self.runs: dict[str, ChatRun] = {}
        self.cancel_requested: set[str] = set()
        self._clock = 0

    def snapshot(self) -> ConversationsState:
        return copy.deepcopy(
            (
                self.rows,
                self.message_rows,
                self.message_status,
                self.runs,
                self.cancel_requested,
                self._clock,
            )
        )

    def restore(self, saved: ConversationsState) -> None:
        (
            self.rows,
            self.message_rows,
            self.message_status,
            self.runs,
            self.cancel_requested,
            self._clock,
        ) = copy.deepcopy(saved)

    def _tick(self) -> datetime:
        self._clock += 1
        return EPOCH + timedelta(seconds=self._clock)

    def _own(self, org_id: str, thread_id: str) -> Conversation | None:
        found = self.rows.get(_canonical(thread_id))
        return found if found is not None and found.org_id == org_id else None

    def _touch(self, conversation: Conversation, **changes: Any) -> Conversation:
        updated = dataclasses.replace(conversation, **changes)
        self.rows[updated.thread_id] = updated
        return updated

    # Helpers for tests

    def end_run(self, run_id: str, status: StreamStatus) -> None:
        """What the run log's `finish` does: end the run, its message and the stream status."""
        run = self.runs[run_id]
        self.runs[run_id] = dataclasses.replace(run, status=status)
        self.message_status[run.message_id] = status.value
        conversation = self.rows.get(run.thread_id)
        if conversation is not None:
            self._touch(conversation, stream_status=status, updated_at=self._tick())

    # The port

    async def add(self, new: NewConversation) -> Conversation:
        thread_id = _canonical(new.thread_id)
        if thread_id in self.rows:
            raise Conflict("A conversation with this threadId already exists")
        now = self._tick()
        conversation = Conversation(
            thread_id=thread_id,
            org_id=new.org_id,
            user_id=new.user_id,
            agent_id=new.agent_id,
            title=new.title,
            title_source=new.title_source,
            title_version=FIRST_TITLE_VERSION,
            upstream_conversation_id=(
                _canonical(new.upstream_conversation_id) if new.upstream_conversation_id else None
            ),
            stream_status=None,
            created_at=now,
            updated_at=now,
        )
        self.rows[thread_id] = conversation
        return conversation

    async def start(
        self,
        new: NewConversation,
        *,
        message_id: str,
        parts: list[dict[str, Any]],
        run_id: str,
        answer_id: str,
    ) -> StoredMessage:
        await self.add(new)
        sent = await self.add_message(
            new.org_id, new.thread_id, message_id=message_id, role="user", parts=parts
        )
        await self.start_run(new.org_id, new.thread_id, run_id=run_id, message_id=answer_id)
        return sent

    async def get(
        self, org_id: str, thread_id: str, *, for_update: bool = False
    ) -> Conversation | None:
        return self._own(org_id, thread_id)

    async def list_for_user(
        self,
        org_id: str,
        user_id: str,
        *,
        agent_id: int | None,
        limit: int,
        after: ConversationCursor | None,
    ) -> list[Conversation]:
        mine = [
            c
            for c in self.rows.values()
            if c.org_id == org_id
            and c.user_id == user_id
            and (agent_id is None or c.agent_id == agent_id)
            and (
                after is None
                or (c.updated_at, uuid.UUID(c.thread_id))
                < (after.updated_at, uuid.UUID(after.thread_id))
            )
        ]
        mine.sort(key=lambda c: (c.updated_at, uuid.UUID(c.thread_id)), reverse=True)
        return mine[:limit]

    async def delete(self, org_id: str, thread_id: str) -> bool:
        conversation = self._own(org_id, thread_id)
        if conversation is None:
            return False
        del self.rows[conversation.thread_id]
        self.message_rows = [m for m in self.message_rows if m.thread_id != conversation.thread_id]
        self.runs = {k: r for k, r in self.runs.items() if r.thread_id != conversation.thread_id}
        return True

    async def rename(self, org_id: str, thread_id: str, title: str | None) -> Conversation | None:
        conversation = self._own(org_id, thread_id)
        if conversation is None:
            return None
        return self._touch(
            conversation,
            title=title,
            title_source=TitleSource.RENAMED,
            title_version=conversation.title_version + 1,
        )

    async def set_generated_title(
        self, org_id: str, thread_id: str, title: str, expected_version: int
    ) -> bool:
        conversation = self._own(org_id, thread_id)
        if (
            conversation is None
            or conversation.title_source is not TitleSource.FALLBACK
            or conversation.title_version != expected_version
        ):
            return False
        self._touch(
            conversation,
            title=title,
            title_source=TitleSource.GENERATED,
            title_version=conversation.title_version + 1,
        )
        return True

    async def add_message(
        self,
        org_id: str,
        thread_id: str,
        *,
        message_id: str,
        role: str,
        parts: list[dict[str, Any]],
    ) -> StoredMessage:
        conversation = self._own(org_id, thread_id)
        if conversation is None:
            raise NotFound(CONVERSATION_NOT_FOUND)
        now = self._tick()
        message = StoredMessage(
            id=_canonical(message_id),
            thread_id=conversation.thread_id,
            role=role,
            parts=copy.deepcopy(parts),
            created_at=now,
        )
        self.message_rows.append(message)
        self.message_status[message.id] = None
        self._touch(conversation, updated_at=now)
        return message

    async def messages(self, org_id: str, thread_id: str) -> list[StoredMessage]:
        conversation = self._own(org_id, thread_id)
        if conversation is None:
            return []
        return [
            copy.deepcopy(m) for m in self.message_rows if m.thread_id == conversation.thread_id
        ]

    async def first_user_message(self, org_id: str, thread_id: str) -> StoredMessage | None:
        return next((m for m in await self.messages(org_id, thread_id) if m.role == "user"), None)

    async def start_run(
        self, org_id: str, thread_id: str, *, run_id: str, message_id: str
    ) -> ChatRun:
        await self.add_message(org_id, thread_id, message_id=message_id, role="assistant", parts=[])
        self.message_status[_canonical(message_id)] = StreamStatus.IN_PROGRESS.value
        conversation = self._own(org_id, thread_id)
        assert conversation is not None
        return self._new_run(conversation, run_id, message_id)

    def _new_run(self, conversation: Conversation, run_id: str, message_id: str) -> ChatRun:
        """A run in progress producing `message_id`, shown by the conversation."""
        now = self._tick()
        self._touch(conversation, stream_status=StreamStatus.IN_PROGRESS, updated_at=now)
        run = ChatRun(
            id=_canonical(run_id),
            org_id=conversation.org_id,
            thread_id=conversation.thread_id,
            message_id=_canonical(message_id),
            status=StreamStatus.IN_PROGRESS,
            created_at=now,
        )
        self.runs[run.id] = run
        return run

    async def resume_run(
        self,
        org_id: str,
        thread_id: str,
        *,
        run_id: str,
        message_id: str,
        parts: list[dict[str, Any]],
    ) -> ChatRun | None:
        conversation = self._own(org_id, thread_id)
        message_id = _canonical(message_id)
        found = [
            i
            for i, m in enumerate(self.message_rows)
            if m.id == message_id and conversation is not None
            and m.thread_id == conversation.thread_id and m.role == "assistant"
        ]  # fmt: skip
        if conversation is None or not found:
            return None
        message = self.message_rows[found[0]]
        self.message_rows[found[0]] = dataclasses.replace(message, parts=copy.deepcopy(parts))
        self.message_status[message_id] = StreamStatus.IN_PROGRESS.value
        return self._new_run(conversation, run_id, message_id)

    async def set_message_parts(
        self,
        org_id: str,
        message_id: str,
        parts: list[dict[str, Any]],
        status: StreamStatus | None = None,
    ) -> bool:
        for i, message in enumerate(self.message_rows):
            own = self._own(org_id, message.thread_id)
            if message.id == _canonical(message_id) and own is not None:
                self.message_rows[i] = dataclasses.replace(message, parts=copy.deepcopy(parts))
                if status is not None:
                    self.message_status[message.id] = status.value
                return True
        return False

    def _runs_of(self, org_id: str, thread_id: str) -> list[ChatRun]:
        conversation = self._own(org_id, thread_id)
        if conversation is None:
            return []
        runs = [r for r in self.runs.values() if r.thread_id == conversation.thread_id]
        return sorted(runs, key=lambda r: r.created_at, reverse=True)

    async def running_run(self, org_id: str, thread_id: str) -> ChatRun | None:
        return next(
            (r for r in self._runs_of(org_id, thread_id) if r.status is StreamStatus.IN_PROGRESS),
            None,
        )

    async def latest_run(self, org_id: str, thread_id: str) -> ChatRun | None:
        runs = self._runs_of(org_id, thread_id)
        return runs[0] if runs else None

    async def request_cancel(self, org_id: str, thread_id: str) -> ChatRun | None:
        run = await self.running_run(org_id, thread_id)
        if run is not None:
            self.cancel_requested.add(run.id)
        return run


if TYPE_CHECKING:  # mypy checks the fake against the port it stands in for
    _conversations: ConversationRepository = FakeConversations()
    _conversations_store: Restorable[ConversationsState] = FakeConversations()
