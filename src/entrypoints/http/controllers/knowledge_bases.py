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
from entrypoints.http.openapi import KB_ID, body_errors, errors
from entrypoints.http.schemas import (
    CreateKnowledgeBaseBody,
    KnowledgeBaseListResponse,
    KnowledgeBaseOut,
    KnowledgeBaseResponse,
    SuccessMessage,
    UpdateKnowledgeBaseBody,
    unset,
)


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
            CreateKnowledgeBaseCommand(
                caller=caller,
                name=data.name,
                description=data.description,
                embedding_model=data.embedding_model,
                embedding_dimensions=data.embedding_dimensions,
                extraction_model=data.extraction_model,
                extraction_schema=data.extraction_schema,
                chunk_size=data.chunk_size,
                chunk_overlap=data.chunk_overlap,
                source=data.source,
            )
        )
        return KnowledgeBaseResponse(success=True, knowledge_base=KnowledgeBaseOut.of(summary))

    @get(responses=errors(403), summary="List the organization's knowledge bases")
    @inject
    async def list_all(
        self, caller: FromDishka[Caller], use_case: FromDishka[ListKnowledgeBases]
    ) -> KnowledgeBaseListResponse:
        summaries = await use_case.execute(ListKnowledgeBasesQuery(caller=caller))
        return KnowledgeBaseListResponse(
            success=True, knowledge_bases=KnowledgeBaseOut.of_all(summaries)
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
            UpdateKnowledgeBaseCommand(
                caller=caller,
                kb_id=data.kb_id,
                name=unset(data.name),
                description=unset(data.description),
                embedding_model=unset(data.embedding_model),
                embedding_dimensions=unset(data.embedding_dimensions),
                extraction_model=unset(data.extraction_model),
                extraction_schema=unset(data.extraction_schema),
                chunk_size=unset(data.chunk_size),
                chunk_overlap=unset(data.chunk_overlap),
                source=unset(data.source),
            )
        )
        return KnowledgeBaseResponse(success=True, knowledge_base=KnowledgeBaseOut.of(summary))

    @delete(status_code=200, responses=errors(400, 403, 404), summary="Delete a knowledge base")
    @inject
    async def remove(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[DeleteKnowledgeBase],
        kb_id: Annotated[int, KB_ID],
    ) -> SuccessMessage:
        report = await use_case.execute(DeleteKnowledgeBaseCommand(caller=caller, kb_id=kb_id))
        return SuccessMessage(
            success=True,
            message=f"Knowledge base deleted with {report.files_removed} file(s)",
        )
