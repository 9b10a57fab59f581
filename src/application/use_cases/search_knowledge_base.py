from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from application.metering import SpendMeter
from application.ports.chunk_repository import ChunkRepository, SearchScope
from application.ports.embedder import EmbedderRegistry
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from domain.chunks import MAX_SEARCHED, SearchResult, parse_search_query, parse_top_k
from domain.errors import Invalid, NotFound, field_error
from domain.identity import Caller
from domain.knowledge_bases import KB_ID_REQUIRED, KB_NOT_FOUND, parse_kb_id


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchKnowledgeBaseQuery:
    caller: Caller
    kb_ids: list[int]
    query: str
    top_k: int
    skip_missing: bool = False

    @classmethod
    def parse(
        cls,
        *,
        caller: Caller,
        kb_ids: object,
        query: object,
        top_k: object = None,
        skip_missing: bool = False,
    ) -> SearchKnowledgeBaseQuery:
        """1 to 20 knowledge bases, each a positive integer id (400 "Valid knowledge base ID is
        required"; repeated ones count once); the query (`parse_search_query`); `top_k`
        (`parse_top_k`)."""
        if not isinstance(kb_ids, list) or not kb_ids or len(kb_ids) > MAX_SEARCHED:
            raise Invalid(KB_ID_REQUIRED, [field_error("kbIds", f"1 to {MAX_SEARCHED} ids")])
        return cls(
            caller=caller,
            kb_ids=list(dict.fromkeys(parse_kb_id(k) for k in kb_ids)),
            query=parse_search_query(query),
            top_k=parse_top_k(top_k),
            skip_missing=skip_missing,
        )


class SearchKnowledgeBase:
    """Find the passages of one or more knowledge bases that best answer a query.

    Rules: every knowledge base is the caller's organization's (a foreign or missing one is 404
    "Knowledge base not found", unless `skip_missing`: then it is left out, as for an agent whose
    knowledge base was deleted after it was read, and none left finds nothing). The query is
    embedded once per embedding model in use among them; results fuse vector and full-text rankings,
    best first, and come from each knowledge base's current model (not one still being re-embedded).
    Embedding the query with a priced model is metered against the spend caps (`SpendCapReached`
    when refused). Chat reuses it.
    """

    def __init__(
        self,
        knowledge_bases: KnowledgeBaseRepository,
        chunks: ChunkRepository,
        embedders: EmbedderRegistry,
        meter: SpendMeter,
    ) -> None:
        self._meter = meter
        self._kbs = knowledge_bases
        self._chunks = chunks
        self._embedders = embedders

    async def execute(self, query: SearchKnowledgeBaseQuery) -> list[SearchResult]:
        groups: dict[tuple[str, int], list[int]] = defaultdict(list)
        for kb_id in query.kb_ids:
            kb = await self._kbs.get(query.caller.org_id, kb_id)
            if kb is None and query.skip_missing:
                continue
            if kb is None:
                raise NotFound(KB_NOT_FOUND)
            groups[(kb.embedding_model, kb.embedding_dimensions)].append(kb.id)
        if not groups:
            return []
        scopes = []
        embedders = self._meter.embedders(
            self._embedders, query.caller.org_id, query.caller.user_id
        )
        for (model, dimensions), ids in groups.items():
            (vector,) = await embedders.get(model, dimensions).embed([query.query])
            scopes.append(
                SearchScope(
                    knowledge_base_ids=ids,
                    embedding_model=model,
                    dimensions=dimensions,
                    query_vector=vector,
                )
            )
        return await self._chunks.search(
            query.caller.org_id, query=query.query.strip(), scopes=scopes, top_k=query.top_k
        )
