from __future__ import annotations

from dataclasses import dataclass

from application.ports.conversation_repository import ConversationRepository
from application.ports.unit_of_work import UnitOfWork
from domain.conversations import (
    CONVERSATION_NOT_FOUND,
    Conversation,
    parse_thread_id,
    validate_title,
    visible_to,
)
from domain.errors import Invalid, NotFound, field_error
from domain.identity import Caller
from domain.text import required
from domain.values import UNSET


@dataclass(frozen=True, slots=True, kw_only=True)
class RenameConversationCommand:
    caller: Caller
    thread_id: str
    title: str | None
    """The new title; None clears it."""

    @classmethod
    def parse(
        cls, *, caller: Caller, thread_id: object, name: object = UNSET
    ) -> RenameConversationCommand:
        """The thread id (a uuid, 400); `name` is required (400 "name is required"): `""` or null
        clears the title, any other value follows the title rules (1 to 120 characters after
        trimming, one line, no control characters; 400 with the field `name`)."""
        thread = parse_thread_id(thread_id)
        if name is UNSET:
            raise Invalid(required("name"), [field_error("name", "required")])
        title = None if name is None or name == "" else validate_title(name, field="name")
        return cls(caller=caller, thread_id=thread, title=title)


class RenameConversation:
    """Give a conversation the member's own title, or clear it.

    Rules: the conversation must be visible to the caller (its starter, or an admin of the
    organization), else 404 "Conversation not found".
    A rename always wins over automatic naming, even a generation already running: it moves
    the title version on, and a generated title is only saved at the version it started from.
    """

    def __init__(self, conversations: ConversationRepository, uow: UnitOfWork) -> None:
        self._conversations = conversations
        self._uow = uow

    async def execute(self, command: RenameConversationCommand) -> Conversation:
        thread_id, title, org_id = command.thread_id, command.title, command.caller.org_id
        conversation = await self._conversations.get(org_id, thread_id, for_update=True)
        if conversation is None or not visible_to(conversation, command.caller):
            raise NotFound(CONVERSATION_NOT_FOUND)
        renamed = await self._conversations.rename(org_id, thread_id, title)
        if renamed is None:
            raise NotFound(CONVERSATION_NOT_FOUND)
        await self._uow.commit()
        return renamed
