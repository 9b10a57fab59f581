from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Literal

from application.metering import SpendMeter
from application.ports.chunk_repository import ChunkRepository, SearchScope
from application.ports.embedder import Embedder, EmbedderRegistry
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.reranker import Reranker, RerankFailed
from domain.chunks import MAX_SEARCHED, SearchResult, parse_search_query, parse_top_k
from domain.errors import Invalid, NotFound, field_error
from domain.identity import Caller
from domain.knowledge_bases import KB_ID_REQUIRED, KB_NOT_FOUND, parse_kb_id
from domain.search import Filter, parse_filters

RERANK_UNAVAILABLE = "rerank is not available: no reranker is configured"
RERANK_INVALID = "rerank must be a boolean"
DEFAULT_RERANK_CANDIDATES = 30
RerankStatus = Literal["applied", "failed", "off"]


@dataclass(frozen=True, slots=True)
class Reranking:
    """The deployment's reranker (None: none configured) and how many of the best fused
    passages it orders (at least the search's `topK`)."""

    reranker: Reranker | None = None
    candidates: int = DEFAULT_RERANK_CANDIDATES


NO_RERANKING = Reranking()


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchAnswer:
    """The passages found, best first, and whether a reranker ordered them: `applied`, `failed`
    (it could not: the fused order, `rerank_error` says why) or `off`."""

    results: list[SearchResult]
    rerank: RerankStatus = "off"
    rerank_error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchKnowledgeBaseQuery:
    caller: Caller
    kb_ids: list[int]
    query: str
    top_k: int
    filters: Filter | None = None
    rerank: bool | None = None
    """None: rerank when a reranker is configured."""
    skip_missing: bool = False

    @classmethod
    def parse(
        cls,
        *,
        caller: Caller,
        kb_ids: object,
        query: object,
        top_k: object = None,
        filters: object = None,
        rerank: object = None,
        skip_missing: bool = False,
    ) -> SearchKnowledgeBaseQuery:
        """1 to 20 knowledge bases, each a positive integer id (400 "Valid knowledge base ID is
        required"; repeated ones count once); the query (`parse_search_query`); `top_k`
        (`parse_top_k`); the filters (`parse_filters`); `rerank`, a boolean or null."""
        if rerank is not None and not isinstance(rerank, bool):
            raise Invalid(RERANK_INVALID, [field_error("rerank", "expected a boolean")])
        if not isinstance(kb_ids, list) or not kb_ids or len(kb_ids) > MAX_SEARCHED:
            raise Invalid(KB_ID_REQUIRED, [field_error("kbIds", f"1 to {MAX_SEARCHED} ids")])
        return cls(
            caller=caller,
            kb_ids=list(dict.fromkeys(parse_kb_id(k) for k in kb_ids)),
            query=parse_search_query(query),
            top_k=parse_top_k(top_k),
            filters=parse_filters(filters),
            rerank=rerank,
            skip_missing=skip_missing,
        )


class SearchKnowledgeBase:
    """Find the passages of one or more knowledge bases that best answer a query.

    Rules: every knowledge base is the caller's organization's (a foreign or missing one is 404
    "Knowledge base not found", unless `skip_missing`: then it is left out, as for an agent whose
    knowledge base was deleted after it was read, and none left finds nothing). The query is
    embedded once per embedding model in use among them; results fuse vector and BM25 full-text
    rankings, best first, from the files the filters let through, and come from each knowledge
    base's current model (not one still being re-embedded). With a reranker configured (and
    `rerank` not false), the best `rerank_candidates` fused passages are ordered by its scores,
    which become theirs; a reranker that fails leaves the fused order, and the answer says so.
    `rerank: true` without a reranker is 400. Embedding the query with a priced model is metered
    against the spend caps (`SpendCapReached` when refused). Chat reuses it.
    """

    def __init__(
        self,
        knowledge_bases: KnowledgeBaseRepository,
        chunks: ChunkRepository,
        embedders: EmbedderRegistry,
        meter: SpendMeter,
        reranking: Reranking = NO_RERANKING,
    ) -> None:
        self._meter = meter
        self._kbs = knowledge_bases
        self._chunks = chunks
        self._embedders = embedders
        self._reranking = reranking

    async def execute(self, query: SearchKnowledgeBaseQuery) -> SearchAnswer:
        configured = self._reranking.reranker
        if query.rerank and configured is None:
            raise Invalid(RERANK_UNAVAILABLE, [field_error("rerank", "no reranker configured")])
        reranker = configured if query.rerank is not False else None
        groups: dict[tuple[str, int], list[tuple[int, str]]] = defaultdict(list)
        for kb_id in query.kb_ids:
            kb = await self._kbs.get(query.caller.org_id, kb_id)
            if kb is None and query.skip_missing:
                continue
            if kb is None:
                raise NotFound(KB_NOT_FOUND)
            groups[(kb.embedding_model, kb.embedding_dimensions)].append((kb.id, kb.language))
        if not groups:
            return SearchAnswer(results=[])
        embedders = self._meter.embedders(
            self._embedders, query.caller.org_id, query.caller.user_id
        )
        depth = max(query.top_k, self._reranking.candidates) if reranker else query.top_k
        # Each query vector is computed while the search ranks the words (`pending_vector`).
        vectors: list[asyncio.Future[list[float]]] = []
        try:
            scopes = []
            for (model, dimensions), kbs in groups.items():
                vectors.append(
                    asyncio.ensure_future(_embed_one(embedders.get(model, dimensions), query))
                )
                scopes.append(
                    SearchScope(
                        knowledge_base_ids=[kb_id for kb_id, _ in kbs],
                        embedding_model=model,
                        dimensions=dimensions,
                        query_vector=[],
                        languages=tuple(language for _, language in kbs),
                        pending_vector=vectors[-1],
                    )
                )
            await asyncio.sleep(0)  # lets each embedding start (reach its model) first
            results = await self._chunks.search(
                query.caller.org_id,
                query=query.query.strip(),
                scopes=scopes,
                top_k=depth,
                filters=query.filters,
            )
            for vector in vectors:
                await vector  # an embedding's failure (a spend cap reached) is the search's
        except BaseException:
            for vector in vectors:
                vector.cancel()
                with contextlib.suppress(BaseException):
                    await vector
            raise
        if reranker is None or not results:
            return SearchAnswer(results=results[: query.top_k])
        try:
            scores = await reranker.rerank(query.query.strip(), [r.text for r in results])
        except RerankFailed as failure:
            return SearchAnswer(
                results=results[: query.top_k], rerank="failed", rerank_error=failure.message
            )
        ranked = sorted(zip(scores, range(len(results)), results, strict=True), reverse=True)
        reranked = [replace(r, score=round(score, 6)) for score, _, r in ranked]
        return SearchAnswer(results=reranked[: query.top_k], rerank="applied")


async def _embed_one(embedder: Embedder, query: SearchKnowledgeBaseQuery) -> list[float]:
    (vector,) = await embedder.embed([query.query])
    return vector
