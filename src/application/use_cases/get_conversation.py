from __future__ import annotations

from dataclasses import dataclass

from application.ports.conversation_repository import ConversationRepository
from domain.conversations import (
    CONVERSATION_NOT_FOUND,
    Conversation,
    StoredMessage,
    ThreadRequest,
    visible_to,
)
from domain.errors import NotFound


@dataclass(frozen=True, slots=True, kw_only=True)
class GetConversationQuery(ThreadRequest):
    """Which conversation to read (`ThreadRequest.parse`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationWithMessages:
    """A conversation and its messages, oldest first; the assistant message of a response
    still running holds what was produced so far."""

    conversation: Conversation
    messages: list[StoredMessage]


class GetConversation:
    """Read one conversation with its messages and the state of its latest response.

    Rules: a conversation is
    visible to the member who started it and to the organization's admins; a conversation
    that is missing, of another organization or of another member (to a non-admin) is 404
    "Conversation not found". The title may change independently of the response (background
    title generation), so it is read as it is now.
    """

    def __init__(self, conversations: ConversationRepository) -> None:
        self._conversations = conversations

    async def execute(self, query: GetConversationQuery) -> ConversationWithMessages:
        thread_id, org_id = query.thread_id, query.caller.org_id
        conversation = await self._conversations.get(org_id, thread_id)
        if conversation is None or not visible_to(conversation, query.caller):
            raise NotFound(CONVERSATION_NOT_FOUND)
        messages = await self._conversations.messages(org_id, thread_id)
        return ConversationWithMessages(conversation=conversation, messages=messages)
