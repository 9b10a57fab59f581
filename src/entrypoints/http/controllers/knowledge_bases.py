"""`/kb/manage`: create, list, change and delete knowledge bases."""

from __future__ import annotations

from typing import Annotated

from dishka import FromDishka
from litestar import Controller, delete, get, patch, post
from litestar.params import JSONBody

from application.use_cases.create_knowledge_base import (
    CreateKnowledgeBase,
    CreateKnowledgeBaseCommand,
)
from application.use_cases.delete_knowledge_base import (
    DeleteKnowledgeBase,
    DeleteKnowledgeBaseCommand,
)
from application.use_cases.list_knowledge_bases import ListKnowledgeBases, ListKnowledgeBasesQuery
from application.use_cases.update_knowledge_base import (
    UpdateKnowledgeBase,
    UpdateKnowledgeBaseCommand,
)
from domain.identity import Caller
from entrypoints.http.injection import inject
from entrypoints.http.knowledge_base_schemas import (
    CreateKnowledgeBaseBody,
    KnowledgeBaseListResponse,
    KnowledgeBaseOut,
    KnowledgeBaseResponse,
    UpdateKnowledgeBaseBody,
)
from entrypoints.http.openapi import body_errors, errors
from entrypoints.http.params import KB_ID
from entrypoints.http.schemas import SuccessMessage, command


class KnowledgeBaseController(Controller):
    path = "/kb/manage"
    tags = ["Knowledge Base Management"]

    @post(status_code=201, responses=body_errors(403), summary="Create a knowledge base")
    @inject
    async def create(
        self,
        data: JSONBody[CreateKnowledgeBaseBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[CreateKnowledgeBase],
    ) -> KnowledgeBaseResponse:
        summary = await use_case.execute(
            command(CreateKnowledgeBaseCommand.parse, data, caller=caller)
        )
        return KnowledgeBaseResponse(
            success=True, knowledge_base=KnowledgeBaseOut.from_entity(summary)
        )

    @get(responses=errors(403), summary="List the organization's knowledge bases")
    @inject
    async def list_all(
        self, caller: FromDishka[Caller], use_case: FromDishka[ListKnowledgeBases]
    ) -> KnowledgeBaseListResponse:
        summaries = await use_case.execute(ListKnowledgeBasesQuery(caller=caller))
        return KnowledgeBaseListResponse(
            success=True, knowledge_bases=KnowledgeBaseOut.from_entities(summaries)
        )

    @patch(responses=body_errors(403, 404), summary="Change a knowledge base")
    @inject
    async def update(
        self,
        data: JSONBody[UpdateKnowledgeBaseBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[UpdateKnowledgeBase],
    ) -> KnowledgeBaseResponse:
        summary = await use_case.execute(
            command(UpdateKnowledgeBaseCommand.parse, data, caller=caller)
        )
        return KnowledgeBaseResponse(
            success=True, knowledge_base=KnowledgeBaseOut.from_entity(summary)
        )

    @delete(status_code=200, responses=errors(400, 403, 404), summary="Delete a knowledge base")
    @inject
    async def remove(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[DeleteKnowledgeBase],
        kb_id: Annotated[int, KB_ID],
    ) -> SuccessMessage:
        report = await use_case.execute(
            DeleteKnowledgeBaseCommand.parse(caller=caller, kb_id=kb_id)
        )
        return SuccessMessage(
            success=True,
            message=f"Knowledge base deleted with {report.files_removed} file(s)",
        )
