from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from application.ports.chunk_repository import EmbeddedChunk
from domain.chunks import TextChunk


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelChoice:
    """An embedding model and its dimension count."""

    model: str
    dimensions: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StagedPart:
    """One part of a file's passages as staged: the file, the passages, the models to embed
    them with, how many times a job has started on it, and whether its vectors are stored."""

    file_record_id: int
    passages: list[TextChunk]
    models: list[ModelChoice]
    starts: int
    done: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddedPart:
    """A part's passages embedded with one model."""

    model: ModelChoice
    chunks: Sequence[EmbeddedChunk]


class EmbeddingParts(Protocol):
    """A large file's passages split into parts that several jobs embed at the same time.

    What a file has staged belongs to one processing run: staging again, or `discard` when a
    new run begins, replaces it, and a part of a replaced run is gone for good (its id is
    not reused). The vectors of finished parts are kept apart from the searchable passages
    until `publish` moves them all there at once, so search never sees half a file. Scoped to
    one organization; callers serialize a file's part completions by locking the file.
    """

    async def stage(
        self,
        org_id: str,
        *,
        file_record_id: int,
        models: Sequence[ModelChoice],
        parts: Sequence[Sequence[TextChunk]],
    ) -> list[int]:
        """Replace whatever the file had staged with `parts`, none done; their ids, in order."""
        ...

    async def begin(self, org_id: str, part_id: int) -> StagedPart | None:
        """Count one more start of the part and return it; None when it is gone (its run was
        published, failed or replaced)."""
        ...

    async def save(self, org_id: str, part_id: int, embedded: Sequence[EmbeddedPart]) -> int | None:
        """Store the part's vectors (replacing an earlier try's) and mark it done; how many
        parts of the file are still not done, or None when the part is gone."""
        ...

    async def passages(self, org_id: str, file_record_id: int) -> list[TextChunk]:
        """Every passage the file has staged, in the file's order."""
        ...

    async def publish(
        self,
        org_id: str,
        *,
        knowledge_base_id: int,
        file_record_id: int,
        models: Sequence[ModelChoice],
    ) -> None:
        """Make the staged vectors for `models` the file's passages for those models,
        replacing what it had, then drop everything the file has staged."""
        ...

    async def discard(
        self, org_id: str, file_record_id: int, *, if_staged: int | None = None
    ) -> bool:
        """Drop everything the file has staged; with `if_staged`, only when that part is
        still staged. True when something was dropped."""
        ...
