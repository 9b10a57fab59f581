from __future__ import annotations

from typing import Protocol

from domain.chunks import SearchResult
from domain.identity import Caller
from domain.search import Filter

QUERY_CHARS = 2000
"""The longest query a search takes (the agent's are cut to it)."""
PASSAGE_CHARS = 1200
"""How much of each passage found the model reads, wherever the agent searches from."""


class KnowledgeSearch(Protocol):
    """Searches knowledge bases on behalf of a member, from work running outside a request
    (an assistant response); each search opens and closes its own database scope."""

    async def search(
        self,
        caller: Caller,
        kb_ids: list[int],
        query: str,
        top_k: int,
        *,
        filters: Filter | None = None,
    ) -> list[SearchResult]:
        """The best passages of the knowledge bases that still exist, best first, from the files
        `filters` lets through (all when None)."""
        ...
