"""Bodies of the conversation endpoints: msgspec Structs, camelCase on the wire."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from msgspec import Meta

from application.use_cases.get_conversation import ConversationWithMessages
from domain.conversations import MAX_TITLE, THREAD_ID_INVALID
from domain.text import required
from entrypoints.http.rules import Rule
from entrypoints.http.schemas import ONE_LINE, Camel, Uuid, documented


class MessageOut(Camel):
    id: str
    role: str
    parts: list[dict[str, Any]]
    created_at: datetime


class ConversationOut(Camel):
    thread_id: str
    agent_id: int | None
    title: str | None
    stream_status: str | None
    upstream_conversation_id: str | None
    created_at: datetime
    updated_at: datetime


class ConversationDetailOut(Camel):
    """`GET /getConversation`: the conversation with its messages, oldest first."""

    thread_id: str
    agent_id: int | None
    title: str | None
    stream_status: str | None
    upstream_conversation_id: str | None
    messages: list[MessageOut]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, found: ConversationWithMessages) -> ConversationDetailOut:
        messages = MessageOut.from_entities(found.messages)
        return cls.from_entity(found.conversation, messages=messages)


class ConversationListResponse(Camel):
    success: bool
    conversations: list[ConversationOut]
    next_cursor: str | None


class RenameConversationBody(Camel):
    rules = (
        Rule("threadId", THREAD_ID_INVALID),
        Rule("name", required("name"), frozenset({"missing"}), "required"),
    )

    thread_id: Uuid
    name: (
        Annotated[
            str,
            Meta(
                description=f"The new title (1 to {MAX_TITLE} characters, one line); empty "
                "clears it",
                extra_json_schema=documented(f"^$|{ONE_LINE}", maxLength=MAX_TITLE),
            ),
        ]
        | None
    )


class RenameConversationResponse(Camel):
    success: bool
    thread_id: str
    title: str | None
