from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from application.ports.chat_streams import ChatStreams
from application.ports.conversation_repository import ConversationRepository
from domain.chat_stream import Chunk
from domain.conversations import (
    CONVERSATION_NOT_FOUND,
    Conversation,
    ThreadRequest,
    visible_to,
)
from domain.errors import NotFound
from domain.identity import Caller


@dataclass(frozen=True, slots=True, kw_only=True)
class FollowChatResponseQuery(ThreadRequest):
    """Which conversation's answer to follow (`ThreadRequest.parse`)."""


async def visible_conversation(
    conversations: ConversationRepository, caller: Caller, thread_id: str
) -> Conversation:
    """The conversation if the caller may see it: its member, or an admin of its organization."""
    conversation = await conversations.get(caller.org_id, thread_id)
    if conversation is None or not visible_to(conversation, caller):
        raise NotFound(CONVERSATION_NOT_FOUND)
    return conversation


class FollowChatResponse:
    """Resume the stream of a conversation's running answer.

    Rules: the conversation must be one the caller may see (its member,
    or an organization admin; 404 otherwise). When an answer is running, its stream is returned
    from the first chunk, then live until it ends, wherever it is being produced; when none is
    running, there is nothing to resume (None).
    """

    def __init__(self, conversations: ConversationRepository, streams: ChatStreams) -> None:
        self._conversations = conversations
        self._streams = streams

    async def execute(self, query: FollowChatResponseQuery) -> AsyncIterator[list[Chunk]] | None:
        conversation = await visible_conversation(
            self._conversations, query.caller, query.thread_id
        )
        run = await self._conversations.running_run(query.caller.org_id, conversation.thread_id)
        if run is None:
            return None
        return self._streams.follow(query.caller.org_id, run.id)
