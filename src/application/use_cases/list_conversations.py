from __future__ import annotations

from dataclasses import dataclass

from application.ports.conversation_repository import ConversationRepository
from domain.agents import parse_agent_id
from domain.conversations import Conversation, ConversationCursor, validate_list_limit
from domain.identity import Caller


@dataclass(frozen=True, slots=True, kw_only=True)
class ListConversationsQuery:
    caller: Caller
    agent_id: int | None
    limit: int
    after: ConversationCursor | None

    @classmethod
    def parse(
        cls, *, caller: Caller, agent_id: object = None, limit: object = None, cursor: object = None
    ) -> ListConversationsQuery:
        """`agent_id`, when given, a positive integer (400 "Valid agent ID is required"); `limit`
        1 to 100, default 20; `cursor` one this service handed out (400 otherwise)."""
        return cls(
            caller=caller,
            agent_id=None if agent_id is None or agent_id == "" else parse_agent_id(agent_id),
            limit=validate_list_limit(limit),
            after=ConversationCursor.decode(cursor),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationPage:
    """One page of conversations and the cursor of the next (None on the last page)."""

    conversations: list[Conversation]
    next_cursor: str | None


class ListConversations:
    """List the caller's own conversations, most recent activity first, a page at a time.

    Rules: only conversations the caller started are listed (an admin's list is theirs too);
    `agent_id`, when given, keeps only that agent's conversations (an unknown agent simply has
    none). Activity is
    a message or a response, not a rename, so a page boundary is stable under renames.
    """

    def __init__(self, conversations: ConversationRepository) -> None:
        self._conversations = conversations

    async def execute(self, query: ListConversationsQuery) -> ConversationPage:
        agent_id, limit, after = query.agent_id, query.limit, query.after
        rows = await self._conversations.list_for_user(
            query.caller.org_id,
            query.caller.user_id,
            agent_id=agent_id,
            limit=limit + 1,
            after=after,
        )
        page = rows[:limit]
        next_cursor = None
        if len(rows) > limit:
            last = page[-1]
            next_cursor = ConversationCursor(
                updated_at=last.updated_at, thread_id=last.thread_id
            ).encode()
        return ConversationPage(conversations=page, next_cursor=next_cursor)
