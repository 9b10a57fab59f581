"""What extraction produces from a stored file, and the limits that protect the worker."""

from __future__ import annotations

from dataclasses import dataclass, field


class ExtractionFailed(Exception):
    """The file cannot be read; `message` tells its owner why (it becomes `processingError`)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtractionLimits:
    """Bounds on what one file may cost to extract; exceeding one fails the file, not the worker."""

    max_pages: int = 1000
    max_text_chars: int = 20_000_000
    max_decompressed_bytes: int = 200 * 1024 * 1024
    max_image_pixels: int = 40_000_000
    page_image_dpi: int = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtractedPage:
    """The text of one page (1-based), or of the whole file for formats without pages."""

    number: int
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtractedImage:
    """An image to store beside the file: a rendered PDF page or the uploaded image itself."""

    name: str
    data: bytes
    content_type: str
    page_number: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtractedDocument:
    """A file's text as Markdown, page by page where the format has pages, and its images."""

    markdown: str
    pages: list[ExtractedPage] = field(default_factory=list)
    images: list[ExtractedImage] = field(default_factory=list)
