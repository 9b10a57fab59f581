"""Chunking settings, chunks with their citation data, and search results."""

from __future__ import annotations

from dataclasses import dataclass

from domain.errors import Invalid, field_error
from domain.search import Highlight
from domain.text import check_storable, required, too_long

DEFAULT_CHUNK_SIZE = 256
DEFAULT_CHUNK_OVERLAP = 32
MIN_CHUNK_SIZE = 32
MAX_CHUNK_SIZE = 8192
DEFAULT_TOP_K = 8
MAX_TOP_K = 50
MAX_QUERY = 2000
MAX_SEARCHED = 20
"""How many knowledge bases one search may name."""
TOP_K_INVALID = f"topK must be an integer from 1 to {MAX_TOP_K}"


CHUNK_SIZE_INVALID = f"chunkSize must be between {MIN_CHUNK_SIZE} and {MAX_CHUNK_SIZE}"
CHUNK_OVERLAP_INVALID = "chunkOverlap must be at least 0 and less than half of chunkSize"


def _integer(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(f"{name} must be an integer", [field_error(name, "expected an integer")])
    return value


def parse_chunk_size(value: object) -> int:
    """A chunk size in tokens, 32 to 8192."""
    size = _integer(value, "chunkSize")
    if not MIN_CHUNK_SIZE <= size <= MAX_CHUNK_SIZE:
        raise Invalid(CHUNK_SIZE_INVALID, [field_error("chunkSize", "out of range")])
    return size


def parse_chunk_overlap(value: object) -> int:
    """A chunk overlap in tokens, at least 0 (and less than half the size: `check_chunking`)."""
    overlap = _integer(value, "chunkOverlap")
    if overlap < 0:
        raise Invalid(CHUNK_OVERLAP_INVALID, [field_error("chunkOverlap", "out of range")])
    return overlap


def check_chunking(size: int, overlap: int) -> tuple[int, int]:
    """Neighbouring chunks share less than half a chunk: `overlap < size // 2`."""
    if not 0 <= overlap < size // 2:
        raise Invalid(CHUNK_OVERLAP_INVALID, [field_error("chunkOverlap", "out of range")])
    return size, overlap


def parse_search_query(value: object) -> str:
    """A search's query: 1 to 2000 characters, not blank, that PostgreSQL can store."""
    if not isinstance(value, str) or not value.strip():
        raise Invalid(required("query"), [field_error("query", "a non-empty string")])
    if len(value) > MAX_QUERY:
        raise Invalid(too_long("query", MAX_QUERY), [field_error("query", "too long")])
    return check_storable(value, "query")


def parse_top_k(value: object) -> int:
    """How many passages a search answers with: 1 to 50, 8 when absent."""
    if value is None:
        return DEFAULT_TOP_K
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOP_K:
        raise Invalid(TOP_K_INVALID, [field_error("topK", "out of range")])
    return value


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
    highlights: tuple[Highlight, ...] = ()
    """Where the query's terms stand in `text`."""
