from __future__ import annotations

from dataclasses import dataclass

from application.ports.conversation_repository import ConversationRepository
from application.ports.unit_of_work import UnitOfWork
from domain.conversations import CONVERSATION_NOT_FOUND, ThreadRequest, visible_to
from domain.errors import NotFound


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteConversationCommand(ThreadRequest):
    """Which conversation to delete (`ThreadRequest.parse`)."""


class DeleteConversation:
    """Delete a conversation with its messages and its responses' runs.

    Rules: the conversation must be visible to the caller (its starter, or an admin of the
    organization), else 404 "Conversation not found". A
    response still running is asked to stop before the rows go, in the same transaction; the
    process producing it finds its run gone at its next write and stops there, writing nothing.
    """

    def __init__(self, conversations: ConversationRepository, uow: UnitOfWork) -> None:
        self._conversations = conversations
        self._uow = uow

    async def execute(self, command: DeleteConversationCommand) -> None:
        thread_id, org_id = command.thread_id, command.caller.org_id
        conversation = await self._conversations.get(org_id, thread_id, for_update=True)
        if conversation is None or not visible_to(conversation, command.caller):
            raise NotFound(CONVERSATION_NOT_FOUND)
        await self._conversations.request_cancel(org_id, thread_id)
        await self._conversations.delete(org_id, thread_id)
        await self._uow.commit()
