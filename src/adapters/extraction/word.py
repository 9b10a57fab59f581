"""DOCX to Markdown with mammoth, once the zip is known to be a Word document of sane size."""

from __future__ import annotations

import io
import zipfile

import mammoth

from adapters.extraction.markup import html_to_markdown
from domain.extraction import ExtractionFailed, ExtractionLimits

# Password-protected Word files and pre-2007 .doc files are OLE compound files, not zips.
_OLE_SIGNATURE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_MAIN_PART = "word/document.xml"
_NOT_DOCX = "The file is not a valid DOCX document."
# mammoth maps Heading 1-6 itself; a document's Title and Subtitle are headings too.
_STYLE_MAP = "p[style-name='Title'] => h1:fresh\np[style-name='Subtitle'] => h2:fresh"
_WORD_COMPRESSION = frozenset({zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED})


def is_docx_zip(data: bytes) -> bool:
    """Whether `data` is a zip holding a Word main document (reads only the zip directory)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return _MAIN_PART in archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return False


def docx_to_markdown(data: bytes, limits: ExtractionLimits) -> str:
    """The document's text as Markdown: Word headings become `#` headings, images their alt text.

    The zip directory is read first so that a decompression bomb or a zip of something else
    is refused before any part is inflated.
    """
    if data.startswith(_OLE_SIGNATURE):
        raise ExtractionFailed(
            "The document is password-protected or in the old Word 97-2003 format, "
            "which cannot be read; save it as an unprotected .docx file."
        )
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        raise ExtractionFailed(_NOT_DOCX) from None
    # zipfile inflates a deflated entry in bounded steps and never past its declared size,
    # so the declared sizes bound what mammoth can decompress. Word writes only stored and
    # deflated entries; bzip2 and LZMA would inflate a whole read at once, unbounded.
    if any(entry.compress_type not in _WORD_COMPRESSION for entry in entries):
        raise ExtractionFailed(_NOT_DOCX)
    decompressed = sum(entry.file_size for entry in entries)
    if decompressed > limits.max_decompressed_bytes:
        raise ExtractionFailed(
            f"The document is too large once decompressed: {decompressed:,} bytes is more than "
            f"the limit of {limits.max_decompressed_bytes:,} bytes."
        )
    if _MAIN_PART not in {entry.filename for entry in entries}:
        raise ExtractionFailed(_NOT_DOCX)
    result = mammoth.convert_to_html(
        io.BytesIO(data),
        style_map=_STYLE_MAP,
        convert_image=mammoth.images.img_element(lambda _image: {}),
    )
    markdown = html_to_markdown(result.value)
    if not markdown:
        raise ExtractionFailed("The document contains no text.")
    return markdown
