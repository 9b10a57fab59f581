from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from domain.chunks import SearchResult, TextChunk


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

    async def search(
        self,
        org_id: str,
        *,
        query: str,
        scopes: Sequence[SearchScope],
        top_k: int,
    ) -> list[SearchResult]:
        """The `top_k` passages best matching `query`: nearest vectors and full-text matches,
        merged by reciprocal rank fusion, best first."""
        ...
