"""The `TextExtractor` adapter: picks a file's format, runs its reader and enforces the limits;
`extractor_with_ocr` is the one the sandbox's child runs, which reads scans by OCR."""

from __future__ import annotations

import codecs
import enum
import sys
from pathlib import PurePath

from adapters.extraction.images import extract_image, image_kind
from adapters.extraction.markup import html_bytes_to_markdown
from adapters.extraction.ocr import OcrReader, OcrRun, RapidOcrReader, rapidocr_installed
from adapters.extraction.pdf import extract_pdf
from adapters.extraction.text import (
    csv_to_markdown,
    json_to_markdown,
    text_to_markdown,
    text_too_large,
)
from adapters.extraction.word import docx_to_markdown, is_docx_zip
from domain.extraction import (
    ExtractedDocument,
    ExtractedPage,
    ExtractionFailed,
    ExtractionLimits,
)


class FileFormat(enum.Enum):
    """The readers this adapter has; each names the kind of file in its failure messages."""

    PDF = "PDF"
    DOCX = "DOCX document"
    HTML = "HTML page"
    MARKDOWN = "Markdown file"
    TEXT = "text file"
    CSV = "CSV file"
    JSON = "JSON file"
    IMAGE = "image"


_CONTENT_TYPES = {
    "application/pdf": FileFormat.PDF,
    "application/x-pdf": FileFormat.PDF,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": FileFormat.DOCX,
    "text/html": FileFormat.HTML,
    "application/xhtml+xml": FileFormat.HTML,
    "text/markdown": FileFormat.MARKDOWN,
    "text/x-markdown": FileFormat.MARKDOWN,
    "text/plain": FileFormat.TEXT,
    "text/csv": FileFormat.CSV,
    "text/x-csv": FileFormat.CSV,
    "application/csv": FileFormat.CSV,
    "text/comma-separated-values": FileFormat.CSV,
    "text/tab-separated-values": FileFormat.CSV,
    "application/json": FileFormat.JSON,
    "text/json": FileFormat.JSON,
    "image/png": FileFormat.IMAGE,
    "image/jpeg": FileFormat.IMAGE,
    "image/jpg": FileFormat.IMAGE,
    "image/pjpeg": FileFormat.IMAGE,
    "image/gif": FileFormat.IMAGE,
    "image/webp": FileFormat.IMAGE,
    "image/tiff": FileFormat.IMAGE,
    "image/tif": FileFormat.IMAGE,
    "image/x-tiff": FileFormat.IMAGE,
    "application/xml": FileFormat.TEXT,
    "application/yaml": FileFormat.TEXT,
    "application/x-yaml": FileFormat.TEXT,
}
_EXTENSIONS = {
    ".pdf": FileFormat.PDF,
    ".docx": FileFormat.DOCX,
    ".html": FileFormat.HTML,
    ".htm": FileFormat.HTML,
    ".xhtml": FileFormat.HTML,
    ".md": FileFormat.MARKDOWN,
    ".markdown": FileFormat.MARKDOWN,
    ".txt": FileFormat.TEXT,
    ".text": FileFormat.TEXT,
    ".log": FileFormat.TEXT,
    ".xml": FileFormat.TEXT,
    ".yaml": FileFormat.TEXT,
    ".yml": FileFormat.TEXT,
    ".csv": FileFormat.CSV,
    ".tsv": FileFormat.CSV,
    ".json": FileFormat.JSON,
    ".png": FileFormat.IMAGE,
    ".jpg": FileFormat.IMAGE,
    ".jpeg": FileFormat.IMAGE,
    ".gif": FileFormat.IMAGE,
    ".webp": FileFormat.IMAGE,
    ".tif": FileFormat.IMAGE,
    ".tiff": FileFormat.IMAGE,
}
# Types that say nothing about the content: the name's extension, then the bytes, decide.
_UNTYPED = frozenset(
    {
        "",
        "application/octet-stream",
        "binary/octet-stream",
        "application/binary",
        "application/unknown",
        "application/x-download",
        "application/force-download",
        "application/zip",
        "application/x-zip-compressed",
    }
)
# Types that clients send for files of other formats: the extension refines them.
_REFINABLE = {
    "text/plain": frozenset({FileFormat.MARKDOWN, FileFormat.CSV, FileFormat.JSON}),
    "application/vnd.ms-excel": frozenset({FileFormat.CSV}),
}
_SNIFF_BYTES = 8192


class FileTextExtractor:
    """Reads PDF, DOCX, HTML, Markdown, plain text, CSV, JSON and PNG/JPEG/GIF/WebP/TIFF images.

    The format comes from the content type, then the file name's extension, then the first
    bytes. Every failure, including one raised inside a parsing library, surfaces as
    `ExtractionFailed` with a one-sentence message for the file's owner. With an `ocr` reader
    (and `max_ocr_pages` above 0), images and PDF pages without a text layer are read by OCR;
    without, they have no text.
    """

    def __init__(self, ocr: OcrReader | None = None) -> None:
        self._ocr = ocr

    def extract(
        self, data: bytes, *, content_type: str, file_name: str, limits: ExtractionLimits
    ) -> ExtractedDocument:
        """The document as Markdown with its pages and images, or `ExtractionFailed`."""
        if not data:
            raise ExtractionFailed("The file is empty.")
        file_format = detect_format(
            data, content_type, file_name, max_archive_entries=limits.max_archive_entries
        )
        if file_format is None:
            raise ExtractionFailed(f"Unsupported file type: {_describe(content_type, file_name)}.")
        reads = self._ocr is not None and limits.max_ocr_pages > 0
        ocr = OcrRun(self._ocr, limits) if reads else None
        try:
            document = _read(file_format, data, content_type, limits, ocr)
        except ExtractionFailed:
            raise
        except RecursionError:
            raise ExtractionFailed(
                f"The {file_format.value} is nested too deeply to be read."
            ) from None
        except Exception:
            # Parsers fail in their own ways on damaged input; the owner only needs to know
            # that the file cannot be read.
            raise ExtractionFailed(f"The file is not a readable {file_format.value}.") from None
        if len(document.markdown) > limits.max_text_chars:
            raise ExtractionFailed(text_too_large(limits.max_text_chars))
        return document


def extractor_with_ocr() -> FileTextExtractor:
    """The extractor the sandbox's child runs: OCR with the models RapidOCR ships, when it is
    installed (the `local` extra); scans and images have no text otherwise."""
    if rapidocr_installed():
        return FileTextExtractor(RapidOcrReader())
    print("OCR is off: rapidocr and onnxruntime are not installed.", file=sys.stderr)
    return FileTextExtractor()


def _read(
    file_format: FileFormat,
    data: bytes,
    content_type: str,
    limits: ExtractionLimits,
    ocr: OcrRun | None,
) -> ExtractedDocument:
    match file_format:
        case FileFormat.PDF:
            return extract_pdf(data, limits, ocr)
        case FileFormat.IMAGE:
            return extract_image(data, limits, ocr)
        case FileFormat.DOCX:
            markdown = docx_to_markdown(data, limits)
        case FileFormat.HTML:
            markdown = html_bytes_to_markdown(data, content_type, limits.max_markup_elements)
            if not markdown:
                raise ExtractionFailed("The HTML page contains no text.")
        case FileFormat.CSV:
            markdown = csv_to_markdown(data, content_type, limits.max_text_chars)
        case FileFormat.JSON:
            markdown = json_to_markdown(data, content_type, limits.max_text_chars)
        case FileFormat.MARKDOWN | FileFormat.TEXT:
            markdown = text_to_markdown(data, content_type)
    markdown = _storable(markdown)
    return ExtractedDocument(markdown=markdown, pages=[ExtractedPage(number=1, text=markdown)])


def _storable(text: str) -> str:
    """`text` without what PostgreSQL's text type and UTF-8 refuse: NULs, lone surrogates."""
    # Lone surrogates come from JSON escapes such as "\ud800"; they cannot be encoded.
    return text.replace("\x00", "").encode("utf-8", errors="replace").decode("utf-8")


def detect_format(
    data: bytes,
    content_type: str,
    file_name: str,
    *,
    max_archive_entries: int = ExtractionLimits().max_archive_entries,
) -> FileFormat | None:
    """The reader for a file: by content type, else by extension, else by its first bytes.

    A zip is only looked into if it has at most `max_archive_entries` entries.
    """
    media_type = content_type.split(";", 1)[0].strip().lower()
    by_extension = _EXTENSIONS.get(PurePath(file_name).suffix.lower())
    if media_type in _UNTYPED:
        return by_extension or _sniff(data, max_archive_entries)
    if by_extension in _REFINABLE.get(media_type, frozenset()):
        return by_extension
    if media_type in _CONTENT_TYPES:
        return _CONTENT_TYPES[media_type]
    if media_type.endswith("+json"):
        return FileFormat.JSON
    if media_type.startswith("text/"):
        return FileFormat.TEXT
    if media_type.startswith("application/") and media_type.endswith("+xml"):
        return FileFormat.TEXT
    return None


def _sniff(data: bytes, max_archive_entries: int) -> FileFormat | None:
    head = data[:_SNIFF_BYTES]
    if b"%PDF-" in head[:1024]:
        return FileFormat.PDF
    if image_kind(head) is not None:
        return FileFormat.IMAGE
    if head.startswith(b"PK\x03\x04"):
        return FileFormat.DOCX if is_docx_zip(data, max_archive_entries) else None
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return FileFormat.TEXT
    if b"\x00" in head:
        return None
    try:
        codecs.getincrementaldecoder("utf-8-sig")().decode(head, final=False)
    except UnicodeDecodeError:
        return None
    lowered = head.lstrip().lower()
    if lowered.startswith((b"<!doctype html", b"<html")):
        return FileFormat.HTML
    return FileFormat.TEXT


def _describe(content_type: str, file_name: str) -> str:
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type and media_type not in _UNTYPED:
        return media_type
    suffix = PurePath(file_name).suffix.lower()
    if suffix:
        return f"{media_type or 'no content type'}, {suffix} file"
    return media_type or "unknown"
