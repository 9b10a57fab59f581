"""`POST /kb/search`: hybrid search over the caller's knowledge bases."""

from __future__ import annotations

from dishka import FromDishka
from litestar import Response, post
from litestar.datastructures import ResponseHeader
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

RERANK_HEADER = "X-Rerank"
RERANK_ERROR_HEADER = "X-Rerank-Error"


@post(
    "/kb/search",
    status_code=200,
    tags=["Knowledge Bases"],
    responses=body_errors(402, 403, 404, 503),
    summary="Search knowledge bases (vector and BM25 full text, fused by rank; filters; rerank)",
    response_headers=[
        ResponseHeader(
            name=RERANK_HEADER,
            description="`applied`: a reranker ordered the results; `failed`: it could not "
            "(the fused order; `X-Rerank-Error` says why); `off`: no reranking.",
            documentation_only=True,
        ),
        ResponseHeader(
            name=RERANK_ERROR_HEADER,
            description="Why the reranker failed, when `X-Rerank` is `failed`.",
            required=False,
            documentation_only=True,
        ),
    ],
)
@inject
async def search_knowledge_bases(
    data: JSONBody[SearchBody],
    caller: FromDishka[Caller],
    use_case: FromDishka[SearchKnowledgeBase],
) -> Response[SearchResponse]:
    if not isinstance(data.kb_ids, UnsetType):
        kb_ids: list[object] = list(data.kb_ids)
    elif not isinstance(data.kb_id, UnsetType):
        kb_ids = [data.kb_id]
    else:
        kb_ids = []
    answer = await use_case.execute(
        SearchKnowledgeBaseQuery.parse(
            caller=caller,
            kb_ids=kb_ids,
            query=data.query,
            top_k=data.top_k,
            filters=data.filters,
            rerank=data.rerank,
        )
    )
    headers: dict[str, str] = {RERANK_HEADER: answer.rerank}
    if answer.rerank_error:
        headers[RERANK_ERROR_HEADER] = _header_text(answer.rerank_error)
    body = SearchResponse(success=True, results=SearchResultOut.from_entities(answer.results))
    return Response(body, headers=headers)


def _header_text(message: str) -> str:
    """The message as a header value: printable ASCII on one line, at most 200 characters."""
    text = "".join(c if " " <= c <= "~" else " " for c in message)
    return " ".join(text.split())[:200]
