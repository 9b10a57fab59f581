"""Conversations: read one with its messages, list the caller's, rename and delete."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from dishka import FromDishka
from litestar import Controller, delete, get, patch
from litestar.params import JSONBody, QueryParameter

from application.use_cases.delete_conversation import (
    DeleteConversation,
    DeleteConversationCommand,
)
from application.use_cases.get_conversation import GetConversation, GetConversationQuery
from application.use_cases.list_conversations import ListConversations, ListConversationsQuery
from application.use_cases.rename_conversation import (
    RenameConversation,
    RenameConversationCommand,
)
from domain.conversations import LIST_LIMIT_INVALID, MAX_LIST
from domain.identity import Caller
from entrypoints.http.conversation_schemas import (
    ConversationDetailOut,
    ConversationListResponse,
    ConversationOut,
    RenameConversationBody,
    RenameConversationResponse,
)
from entrypoints.http.injection import inject
from entrypoints.http.openapi import body_errors, errors
from entrypoints.http.params import AGENT_ID, THREAD_ID
from entrypoints.http.rules import ParamRule, RuledQuery, limit
from entrypoints.http.schemas import SuccessMessage, command

LIMIT = RuledQuery(
    name="limit",
    ge=1,
    le=MAX_LIST,
    description="Page size",
    rule=ParamRule(LIST_LIMIT_INVALID, limit(MAX_LIST), "out of range"),
)


class ConversationController(Controller):
    path = "/"
    tags = ["Chat"]

    @get(
        "/getConversation",
        responses=errors(400, 403, 404),
        summary="A conversation with its messages and the state of its latest response",
    )
    @inject
    async def get_conversation(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[GetConversation],
        thread_id: Annotated[UUID, THREAD_ID],
    ) -> ConversationDetailOut:
        found = await use_case.execute(
            GetConversationQuery.parse(caller=caller, thread_id=str(thread_id))
        )
        return ConversationDetailOut.of(found)

    @get(
        "/conversations",
        responses=errors(400, 403),
        summary="The caller's conversations, most recent activity first",
    )
    @inject
    async def list_conversations(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[ListConversations],
        agent_id: Annotated[int | None, AGENT_ID] = None,
        limit: Annotated[int | None, LIMIT] = None,
        cursor: Annotated[
            str | None,
            QueryParameter(name="cursor", description="The previous page's `nextCursor`"),
        ] = None,
    ) -> ConversationListResponse:
        page = await use_case.execute(
            ListConversationsQuery.parse(
                caller=caller, agent_id=agent_id, limit=limit, cursor=cursor
            )
        )
        return ConversationListResponse(
            success=True,
            conversations=ConversationOut.from_entities(page.conversations),
            next_cursor=page.next_cursor,
        )

    @delete(
        "/conversations",
        status_code=200,
        responses=errors(400, 403, 404),
        summary="Delete a conversation, stopping its running response",
    )
    @inject
    async def delete_conversation(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[DeleteConversation],
        thread_id: Annotated[UUID, THREAD_ID],
    ) -> SuccessMessage:
        await use_case.execute(
            DeleteConversationCommand.parse(caller=caller, thread_id=str(thread_id))
        )
        return SuccessMessage(success=True, message="Conversation deleted")

    @patch(
        "/api/renameConversation",
        responses=body_errors(403, 404),
        summary="Rename a conversation; an empty name clears the title",
    )
    @inject
    async def rename_conversation(
        self,
        data: JSONBody[RenameConversationBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[RenameConversation],
    ) -> RenameConversationResponse:
        renamed = await use_case.execute(
            command(RenameConversationCommand.parse, data, caller=caller)
        )
        return RenameConversationResponse(
            success=True, thread_id=renamed.thread_id, title=renamed.title
        )
