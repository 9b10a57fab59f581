"""Chunking settings, chunks with their citation data, and search results."""

from __future__ import annotations

from dataclasses import dataclass

from domain.errors import Invalid, field_error

DEFAULT_CHUNK_SIZE = 256
DEFAULT_CHUNK_OVERLAP = 32
MIN_CHUNK_SIZE = 32
MAX_CHUNK_SIZE = 8192
DEFAULT_TOP_K = 8
MAX_TOP_K = 50


def validate_chunking(size: object, overlap: object) -> tuple[int, int]:
    """Chunk size in tokens, 32 to 8192; overlap in tokens, from 0 to less than half the size."""
    for name, value in (("chunkSize", size), ("chunkOverlap", overlap)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid(f"{name} must be an integer", [field_error(name, "expected an integer")])
    assert isinstance(size, int) and isinstance(overlap, int)
    if not MIN_CHUNK_SIZE <= size <= MAX_CHUNK_SIZE:
        raise Invalid(
            f"chunkSize must be between {MIN_CHUNK_SIZE} and {MAX_CHUNK_SIZE}",
            [field_error("chunkSize", "out of range")],
        )
    if not 0 <= overlap < size // 2:
        raise Invalid(
            "chunkOverlap must be at least 0 and less than half of chunkSize",
            [field_error("chunkOverlap", "out of range")],
        )
    return size, overlap


@dataclass(frozen=True, slots=True, kw_only=True)
class TextChunk:
    """A passage of a file's text: its position in the file and the page it starts on."""

    index: int
    text: str
    page_number: int | None
    start_char: int
    end_char: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    """One passage found by a search, with what a citation needs."""

    file_id: str
    file_name: str
    knowledge_base_id: int
    chunk_id: int
    text: str
    score: float
    page_number: int | None
