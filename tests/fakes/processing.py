"""Fakes of the text side of file processing: the extractor and the chunker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from domain.chunks import TextChunk
from domain.extraction import ExtractedDocument, ExtractedImage, ExtractionLimits

if TYPE_CHECKING:
    from application.ports.chunker import Chunker
    from application.ports.text_extractor import TextExtractor


class FakeExtractor:
    """Returns a Markdown document of the bytes, or raises what it was given."""

    def __init__(self, failure: Exception | None = None) -> None:
        self.failure = failure

    def extract(
        self, data: bytes, *, content_type: str, file_name: str, limits: ExtractionLimits
    ) -> ExtractedDocument:
        if self.failure is not None:
            raise self.failure
        images = [
            ExtractedImage(
                name="page-0001.png", data=b"png", content_type="image/png", page_number=1
            )
        ]
        return ExtractedDocument(markdown=data.decode(), images=images)


class FakeChunker:
    """One passage per paragraph."""

    def split(self, document: ExtractedDocument, *, size: int, overlap: int) -> list[TextChunk]:
        parts = [p for p in document.markdown.split("\n\n") if p.strip()]
        return [
            TextChunk(index=i, text=p, page_number=None, start_char=0, end_char=len(p))
            for i, p in enumerate(parts)
        ]


if TYPE_CHECKING:  # mypy checks each fake against the port it stands in for
    _extractor: TextExtractor = FakeExtractor()
    _chunker: Chunker = FakeChunker()
