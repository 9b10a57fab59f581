from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from application.metering import SpendMeter
from application.ports.chunk_repository import ChunkRepository, SearchScope
from application.ports.embedder import EmbedderRegistry
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from domain.chunks import DEFAULT_TOP_K, MAX_TOP_K, SearchResult
from domain.errors import Invalid, NotFound, field_error
from domain.identity import Caller
from domain.ids import parse_positive_id
from domain.knowledge_bases import KB_ID_REQUIRED, KB_NOT_FOUND
from domain.text import check_storable

MAX_QUERY = 2000
MAX_KNOWLEDGE_BASES = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchKnowledgeBaseQuery:
    caller: Caller
    kb_ids: list[object]
    query: object
    top_k: object = None
    skip_missing: bool = False


class SearchKnowledgeBase:
    """Find the passages of one or more knowledge bases that best answer a query.

    Rules: 1 to 20 knowledge bases, each a positive integer id of the caller's organization
    (a foreign or missing one is 404 "Knowledge base not found", unless `skip_missing`: then
    it is left out, as for an agent whose knowledge base was deleted after it was read, and
    none left finds nothing); a query of 1 to 2000 characters without NUL (400 naming
    `query`); `top_k` from 1 to 50, default 8. The query is embedded once per embedding model
    in use among them; results fuse vector and full-text rankings, best first, and come from
    each knowledge base's current model (not one still being re-embedded). Embedding the query
    with a priced model is metered against the spend caps (`SpendCapReached` when refused).
    Chat reuses it.
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
        if not query.kb_ids or len(query.kb_ids) > MAX_KNOWLEDGE_BASES:
            raise Invalid(KB_ID_REQUIRED, [field_error("kbIds", "1 to 20 ids")])
        kb_ids = list(dict.fromkeys(parse_positive_id(k, KB_ID_REQUIRED) for k in query.kb_ids))
        if not isinstance(query.query, str) or not query.query.strip():
            raise Invalid("query is required", [field_error("query", "a non-empty string")])
        if len(query.query) > MAX_QUERY:
            raise Invalid(
                f"query must be at most {MAX_QUERY} characters", [field_error("query", "too long")]
            )
        check_storable(query.query, "query")
        top_k = DEFAULT_TOP_K if query.top_k is None else query.top_k
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            raise Invalid(
                f"topK must be an integer from 1 to {MAX_TOP_K}",
                [field_error("topK", "out of range")],
            )
        groups: dict[tuple[str, int], list[int]] = defaultdict(list)
        for kb_id in kb_ids:
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
            query.caller.org_id, query=query.query.strip(), scopes=scopes, top_k=top_k
        )
