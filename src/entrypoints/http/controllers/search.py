"""`POST /kb/search`: hybrid search over the caller's knowledge bases."""

from __future__ import annotations

from dishka import FromDishka
from litestar import post
from litestar.params import JSONBody
from msgspec import UnsetType

from application.use_cases.search_knowledge_base import (
    SearchKnowledgeBase,
    SearchKnowledgeBaseQuery,
)
from domain.identity import Caller
from entrypoints.http.injection import inject
from entrypoints.http.knowledge_base_schemas import SearchBody, SearchResponse, SearchResultOut
from entrypoints.http.openapi import body_errors


@post(
    "/kb/search",
    status_code=200,
    tags=["Knowledge Bases"],
    responses=body_errors(402, 403, 404, 503),
    summary="Search knowledge bases (vector and full text, fused by rank)",
)
@inject
async def search_knowledge_bases(
    data: JSONBody[SearchBody],
    caller: FromDishka[Caller],
    use_case: FromDishka[SearchKnowledgeBase],
) -> SearchResponse:
    if not isinstance(data.kb_ids, UnsetType):
        kb_ids: list[object] = list(data.kb_ids)
    elif not isinstance(data.kb_id, UnsetType):
        kb_ids = [data.kb_id]
    else:
        kb_ids = []
    results = await use_case.execute(
        SearchKnowledgeBaseQuery.parse(
            caller=caller, kb_ids=kb_ids, query=data.query, top_k=data.top_k
        )
    )
    return SearchResponse(success=True, results=SearchResultOut.from_entities(results))
