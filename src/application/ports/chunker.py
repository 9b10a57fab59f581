from __future__ import annotations

from typing import Protocol

from domain.chunks import TextChunk
from domain.extraction import ExtractedDocument


class Chunker(Protocol):
    """Splits a document's Markdown into passages for embedding.

    Markdown-aware (a passage does not straddle headings when it can help it), sized in
    tokens with an overlap, and each passage keeps its character span in the Markdown and the
    page it starts on. Synchronous and CPU-bound: callers run it off the event loop.
    """

    def split(self, document: ExtractedDocument, *, size: int, overlap: int) -> list[TextChunk]:
        """The passages in document order, numbered from 0; none for a document without text."""
        ...
