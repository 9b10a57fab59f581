from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from domain.chunks import SearchResult, TextChunk
from domain.search import Filter


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddedChunk:
    chunk: TextChunk
    vector: list[float]


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchScope:
    """The knowledge bases searched with one query vector: same model and dimension count."""

    knowledge_base_ids: list[int]
    embedding_model: str
    dimensions: int
    query_vector: list[float]
    languages: tuple[str, ...] = ()
    """Each knowledge base's full-text language, in the order of `knowledge_base_ids` (empty:
    the repository reads them)."""
    pending_vector: Awaitable[list[float]] | None = None
    """The query vector while it is still being computed (`query_vector` is empty until then):
    a search can rank the words meanwhile, then waits for it (`resolved`)."""

    async def resolved(self) -> SearchScope:
        """The scope with its query vector (waiting for a pending one)."""
        if self.pending_vector is None:
            return self
        return replace(self, query_vector=await self.pending_vector, pending_vector=None)


class ChunkRepository(Protocol):
    """Passages with their embeddings, scoped to one organization.

    A file's passages are stored per embedding model, so a knowledge base can be re-embedded
    with another model while search keeps answering from the current one.
    """

    async def replace_for_file(
        self,
        org_id: str,
        *,
        knowledge_base_id: int,
        file_record_id: int,
        embedding_model: str,
        dimensions: int,
        chunks: Sequence[EmbeddedChunk],
    ) -> None:
        """Make `chunks` the file's only passages for that model (idempotent)."""
        ...

    async def passages_for_file(
        self, org_id: str, file_record_id: int, embedding_model: str
    ) -> list[TextChunk]:
        """The file's passages stored for that model, in order."""
        ...

    async def delete_for_knowledge_base(
        self, org_id: str, knowledge_base_id: int, *, except_model: str
    ) -> None:
        """Delete the knowledge base's passages of every model but `except_model`."""
        ...

    async def reindex_text(self, org_id: str, knowledge_base_id: int) -> None:
        """Rewrite the full-text index of the knowledge base's passages in its current
        `language` (after a change of it), in the caller's transaction."""
        ...

    async def search(
        self,
        org_id: str,
        *,
        query: str,
        scopes: Sequence[SearchScope],
        top_k: int,
        filters: Filter | None = None,
    ) -> list[SearchResult]:
        """The `top_k` passages best matching `query`, best first, with their highlights:
        nearest vectors and BM25 full-text matches, fused by reciprocal rank, of the files that
        `filters` lets through (all when None)."""
        ...
