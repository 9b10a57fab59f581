from __future__ import annotations

from typing import Protocol

from domain.extraction import ExtractedDocument, ExtractionLimits


class ExtractorCrashed(Exception):
    """The extractor's process died on the file (a crash in native code, say). It may not
    happen again, so the queue retries; `message` tells the file's owner if it always does."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TextExtractor(Protocol):
    """Turns a stored file's bytes into Markdown text, pages and images.

    Supports PDF (text per page, each page rendered to PNG), DOCX, HTML, Markdown, plain text,
    CSV, JSON and images (stored as they are, no text). Synchronous and CPU-bound: callers run
    it off the event loop. Raises `ExtractionFailed` with a message for its owner when the
    file is corrupt, encrypted, empty, unsupported or beyond `limits`; never anything else for
    bad input, and never takes the process down (decompression bombs are refused early).
    """

    def extract(
        self, data: bytes, *, content_type: str, file_name: str, limits: ExtractionLimits
    ) -> ExtractedDocument:
        """The document, or `ExtractionFailed`."""
        ...
