from __future__ import annotations

from typing import Protocol

from domain.chunks import SearchResult
from domain.identity import Caller


class KnowledgeSearch(Protocol):
    """Searches knowledge bases on behalf of a member, from work running outside a request
    (an assistant response); each search opens and closes its own database scope."""

    async def search(
        self, caller: Caller, kb_ids: list[int], query: str, top_k: int
    ) -> list[SearchResult]:
        """The best passages of the knowledge bases that still exist, best first."""
        ...
