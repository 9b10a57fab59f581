"""Fakes of the embedding side of file processing: a deterministic embedder and its registry,
the chunk repository and the staged parts of large files."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict

from application.ports.chunk_repository import EmbeddedChunk, SearchScope
from application.ports.embedding_parts import EmbeddedPart, ModelChoice, StagedPart
from domain.chunks import SearchResult, TextChunk
from domain.search import Filter

if TYPE_CHECKING:
    from application.ports.chunk_repository import ChunkRepository
    from application.ports.embedder import Embedder, EmbedderRegistry
    from application.ports.embedding_parts import EmbeddingParts
    from tests.fakes.basics import Restorable


class HashingEmbedder:
    """A deterministic embedder for fast tests: a normalised bag of hashed words, so texts
    sharing words are close. Can be told to fail."""

    def __init__(self, dimensions: int = 384, failure: Exception | None = None) -> None:
        self._dimensions = dimensions
        self.failure = failure
        self.calls = 0

    @property
    def dimensions(self) -> int:
        return self._dimensions

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.failure is not None:
            raise self.failure
        vectors = []
        for text in texts:
            vector = [0.0] * self._dimensions
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
                vector[int.from_bytes(digest, "big") % self._dimensions] += 1.0
            norm = math.sqrt(sum(v * v for v in vector)) or 1.0
            vectors.append([v / norm for v in vector])
        return vectors


class FakeEmbedderRegistry:
    def __init__(self, embedder: HashingEmbedder | None = None) -> None:
        self.embedder = embedder or HashingEmbedder()

    def get(self, model: str, dimensions: int) -> HashingEmbedder:
        if dimensions != self.embedder.dimensions:
            return HashingEmbedder(dimensions, self.embedder.failure)
        return self.embedder


ChunksState = dict[tuple[int, str], list[EmbeddedChunk]]


class FakeChunks:
    """Passages by (file record id, embedding model); `search` answers with `found` (nothing
    unless a test stages results) and records each call in `searches`; `reindexed` lists the
    (organization, knowledge base) of each `reindex_text` call."""

    def __init__(self) -> None:
        self.stored: ChunksState = {}
        self.reindexed: list[tuple[str, int]] = []
        self.found: list[SearchResult] = []
        self.searches: list[dict[str, object]] = []

    def snapshot(self) -> ChunksState:
        return dict(self.stored)

    def restore(self, saved: ChunksState) -> None:
        self.stored = dict(saved)

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
        self.stored[(file_record_id, embedding_model)] = list(chunks)

    async def passages_for_file(
        self, org_id: str, file_record_id: int, embedding_model: str
    ) -> list[TextChunk]:
        return [item.chunk for item in self.stored.get((file_record_id, embedding_model), [])]

    async def delete_for_knowledge_base(
        self, org_id: str, knowledge_base_id: int, *, except_model: str
    ) -> None:
        self.stored = {k: v for k, v in self.stored.items() if k[1] == except_model}

    async def reindex_text(self, org_id: str, knowledge_base_id: int) -> None:
        self.reindexed.append((org_id, knowledge_base_id))

    async def search(
        self,
        org_id: str,
        *,
        query: str,
        scopes: Sequence[SearchScope],
        top_k: int,
        filters: Filter | None = None,
    ) -> list[SearchResult]:
        """The first `top_k` of `found` (what a test staged), the call recorded in
        `searches`."""
        self.searches.append({"query": query, "top_k": top_k, "filters": filters})
        return list(self.found[:top_k])


class StagedRow(TypedDict):
    """One staged part as `FakeEmbeddingParts.parts` keeps it (tests read and set its keys)."""

    org: str
    file: int
    part: int
    models: list[ModelChoice]
    passages: list[TextChunk]
    starts: int
    done: bool
    vectors: list[EmbeddedPart]


PartsState = dict[int, StagedRow]


class FakeEmbeddingParts:
    """Staged parts in memory; published passages go to the given `FakeChunks`."""

    def __init__(self, chunks: FakeChunks) -> None:
        self.chunks = chunks
        self.parts: PartsState = {}
        self._next = 1

    def snapshot(self) -> PartsState:
        return {k: v.copy() for k, v in self.parts.items()}

    def restore(self, saved: PartsState) -> None:
        self.parts = {k: v.copy() for k, v in saved.items()}

    async def stage(
        self,
        org_id: str,
        *,
        file_record_id: int,
        models: Sequence[ModelChoice],
        parts: Sequence[Sequence[TextChunk]],
    ) -> list[int]:
        await self.discard(org_id, file_record_id)
        ids = []
        for number, passages in enumerate(parts):
            self.parts[self._next] = {
                "org": org_id, "file": file_record_id, "part": number, "models": list(models),
                "passages": list(passages), "starts": 0, "done": False, "vectors": [],
            }  # fmt: skip
            ids.append(self._next)
            self._next += 1
        return ids

    async def begin(self, org_id: str, part_id: int) -> StagedPart | None:
        part = self.parts.get(part_id)
        if part is None or part["org"] != org_id:
            return None
        part["starts"] += 1
        return StagedPart(
            file_record_id=part["file"],
            passages=list(part["passages"]),
            models=list(part["models"]),
            starts=part["starts"],
            done=part["done"],
        )

    async def save(self, org_id: str, part_id: int, embedded: Sequence[EmbeddedPart]) -> int | None:
        part = self.parts.get(part_id)
        if part is None or part["org"] != org_id:
            return None
        part["done"], part["vectors"] = True, list(embedded)
        same_file = [p for p in self.parts.values() if p["file"] == part["file"]]
        return sum(1 for p in same_file if not p["done"])

    async def passages(self, org_id: str, file_record_id: int) -> list[TextChunk]:
        found = [p for p in self.parts.values() if p["file"] == file_record_id]
        return sorted((c for p in found for c in p["passages"]), key=lambda c: c.index)

    async def publish(
        self,
        org_id: str,
        *,
        knowledge_base_id: int,
        file_record_id: int,
        models: Sequence[ModelChoice],
    ) -> None:
        found = [p for p in self.parts.values() if p["file"] == file_record_id]
        for choice in models:
            chunks = sorted(
                (
                    item
                    for p in found
                    for embedded in p["vectors"]
                    if embedded.model == choice
                    for item in embedded.chunks
                ),
                key=lambda item: item.chunk.index,
            )
            await self.chunks.replace_for_file(
                org_id,
                knowledge_base_id=knowledge_base_id,
                file_record_id=file_record_id,
                embedding_model=choice.model,
                dimensions=choice.dimensions,
                chunks=chunks,
            )
        await self.discard(org_id, file_record_id)

    async def discard(
        self, org_id: str, file_record_id: int, *, if_staged: int | None = None
    ) -> bool:
        if if_staged is not None:
            staged = self.parts.get(if_staged)
            if staged is None or staged["file"] != file_record_id:
                return False
        before = len(self.parts)
        self.parts = {k: v for k, v in self.parts.items() if v["file"] != file_record_id}
        return len(self.parts) != before


if TYPE_CHECKING:  # mypy checks each fake against the port it stands in for
    _embedder: Embedder = HashingEmbedder()
    _embedder_registry: EmbedderRegistry = FakeEmbedderRegistry()
    _chunks: ChunkRepository = FakeChunks()
    _chunks_store: Restorable[ChunksState] = FakeChunks()
    _parts: EmbeddingParts = FakeEmbeddingParts(FakeChunks())
    _parts_store: Restorable[PartsState] = FakeEmbeddingParts(FakeChunks())
