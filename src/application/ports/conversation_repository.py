from __future__ import annotations

from typing import Any, Protocol

from domain.conversations import (
    ChatRun,
    Conversation,
    ConversationCursor,
    NewConversation,
    StoredMessage,
    StreamStatus,
)


class ConversationRepository(Protocol):
    """Conversations, their messages and their runs, in the caller's unit of work.

    Every method takes the organization id; a conversation of another organization behaves
    exactly like a missing one. Writes become visible when the unit of work commits.
    """

    async def add(self, new: NewConversation) -> Conversation:
        """Insert a conversation (stream status none yet, title version
        `FIRST_TITLE_VERSION`)."""
        ...

    async def start(
        self,
        new: NewConversation,
        *,
        message_id: str,
        parts: list[dict[str, Any]],
        run_id: str,
        answer_id: str,
    ) -> StoredMessage:
        """Create a conversation with its first message (role `user`) and the start of its
        answer, as `add`, `add_message` and `start_run` would, in one atomic write: in the
        unit of work's transaction when one is open, committed at once otherwise. Returns the
        user message; Conflict when `new.thread_id` exists."""
        ...

    async def get(
        self, org_id: str, thread_id: str, *, for_update: bool = False
    ) -> Conversation | None:
        """The conversation, or None; `for_update` locks it until the transaction ends."""
        ...

    async def list_for_user(
        self,
        org_id: str,
        user_id: str,
        *,
        agent_id: int | None,
        limit: int,
        after: ConversationCursor | None,
    ) -> list[Conversation]:
        """The member's conversations, most recently updated first, after the cursor."""
        ...

    async def delete(self, org_id: str, thread_id: str) -> bool:
        """Delete the conversation with its messages and runs. False if missing."""
        ...

    async def rename(self, org_id: str, thread_id: str, title: str | None) -> Conversation | None:
        """Set (or clear) the title as the member's choice: the source becomes `renamed` and
        the title version moves on, so that a title generation already running loses."""
        ...

    async def set_generated_title(
        self, org_id: str, thread_id: str, title: str, expected_version: int
    ) -> bool:
        """Replace a `fallback` title with a generated one, only if the title is still the
        fallback at `expected_version`; False when a rename (or anything else) came first."""
        ...

    async def add_message(
        self,
        org_id: str,
        thread_id: str,
        *,
        message_id: str,
        role: str,
        parts: list[dict[str, Any]],
    ) -> StoredMessage:
        """Append a message to the conversation and bump its `updated_at`."""
        ...

    async def messages(self, org_id: str, thread_id: str) -> list[StoredMessage]:
        """The conversation's messages, oldest first."""
        ...

    async def first_user_message(self, org_id: str, thread_id: str) -> StoredMessage | None:
        """The conversation's first user message, or None."""
        ...

    async def start_run(
        self, org_id: str, thread_id: str, *, run_id: str, message_id: str
    ) -> ChatRun:
        """Record a new assistant response: an empty assistant message `message_id`, a run in
        progress, and the conversation's stream status `in_progress`."""
        ...

    async def resume_run(
        self,
        org_id: str,
        thread_id: str,
        *,
        run_id: str,
        message_id: str,
        parts: list[dict[str, Any]],
    ) -> ChatRun | None:
        """Record the continuation of the assistant message `message_id` (an answer paused for
        approvals): its parts replaced by `parts`, a new run in progress producing it, and the
        message's and conversation's status `in_progress`. None when the message is not one of
        the conversation's."""
        ...

    async def set_message_parts(
        self,
        org_id: str,
        message_id: str,
        parts: list[dict[str, Any]],
        status: StreamStatus | None = None,
    ) -> bool:
        """Replace the parts of a message (an approval's decision recorded) and, when given, its
        status; False if missing."""
        ...

    async def running_run(self, org_id: str, thread_id: str) -> ChatRun | None:
        """The conversation's run still in progress, or None."""
        ...

    async def latest_run(self, org_id: str, thread_id: str) -> ChatRun | None:
        """The conversation's most recent run, whatever its status, or None."""
        ...

    async def request_cancel(self, org_id: str, thread_id: str) -> ChatRun | None:
        """Flag the running run, if any, to stop; the process producing it sees the flag."""
        ...
