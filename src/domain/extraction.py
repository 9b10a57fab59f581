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
    """Bounds on what one file may cost to extract; exceeding one fails the file, not the worker.

    Every bound on what a file grows to is checked before the parser that would grow it runs,
    by inflating with a cap what the parser would inflate whole; sizes a file declares are
    never trusted alone.

    - `max_pages`: pages of a PDF, or of a TIFF image (one a frame).
    - `max_text_chars`: characters of the extracted text, all pages together.
    - `max_decompressed_bytes`: the whole document decompressed: a DOCX's zip members
      together; for a PDF, the streams PDFium inflates to open it, its streams once each, and
      its pages' content as PDFium parses it (each of the three against this limit).
    - `max_stream_bytes`: one part decompressed: a DOCX zip member, or a PDF stream that PDFium
      reads whole (cross-reference and object streams, metadata, fonts, colour profiles), but
      not an image's pixels, which PDFium decodes line by line as it renders.
    - `max_page_content_bytes`: one PDF page's content as PDFium parses it when the page loads
      and renders: its content streams together, each form counted as often as it is drawn,
      and its annotations' appearances; also one form, glyph or pattern on its own. PDFium
      keeps 25-30 times this in memory while the page is open.
    - `max_page_text_chars`: characters one PDF page may show, counted as the bytes of the
      strings in its content (one or two a character) before PDFium builds its text layer,
      which takes about 200 bytes a character.
    - `max_archive_entries`: members of a DOCX zip (loading the zip directory costs memory for
      each).
    - `max_markup_elements`: XML elements of a DOCX's parts, or tags of an HTML page;
      converting one costs about 100 µs of CPU and 1-2 KiB of memory.
    - `max_image_pixels`: an uploaded image (each frame of a TIFF), and the rendering of one
      PDF page, as a PNG or to be read by OCR (scaled down to fit).
    - `page_image_dpi`: the resolution PDF pages are rendered at.
    - `max_ocr_pages`: pages of one file read by OCR (a PDF page without a text layer, a frame
      of an image); 0 turns OCR off. Further scanned pages keep no text; the file completes.
    - `max_ocr_seconds`: time OCR may take on one file; the pages it has not reached by then
      keep no text. Below the sandbox's timeout, which fails the whole file.
    - `ocr_dpi`: the resolution a PDF page without a text layer is rendered at to be read.
    - `ocr_threads`: CPU threads the OCR models run on (in each extracting process).
    """

    max_pages: int = 1000
    max_text_chars: int = 20_000_000
    max_decompressed_bytes: int = 200 * 1024 * 1024
    max_stream_bytes: int = 64 * 1024 * 1024
    max_page_content_bytes: int = 32 * 1024 * 1024
    max_page_text_chars: int = 1_000_000
    max_archive_entries: int = 10_000
    max_markup_elements: int = 500_000
    max_image_pixels: int = 40_000_000
    page_image_dpi: int = 100
    max_ocr_pages: int = 100
    max_ocr_seconds: float = 300.0
    ocr_dpi: int = 150
    ocr_threads: int = 1


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
    """A file's text as Markdown, page by page where the format has pages, and its images;
    `ocr_pages` counts the pages whose text OCR read (scanned PDF pages, image frames)."""

    markdown: str
    pages: list[ExtractedPage] = field(default_factory=list)
    images: list[ExtractedImage] = field(default_factory=list)
    ocr_pages: int = 0
