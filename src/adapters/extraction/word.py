"""DOCX to Markdown with mammoth, once the zip is known to be a Word document of sane size.

mammoth reads its parts with `zipfile` and parses each whole with `xml.dom.minidom`, then
builds its own tree, HTML and Markdown from it: about 100 µs of CPU and 1-2 KiB of memory per
XML element, with nothing bounding either. So before mammoth runs, the zip directory is checked
(entries, declared sizes, compression methods) and then every XML part is inflated in pieces
and read by expat without building anything: its real size and its element count are held to
the limits, and a document type declaration (which Word never writes and which can define
entities that expand) is refused.
"""

from __future__ import annotations

import io
import xml.parsers.expat
import zipfile
from typing import NoReturn

import mammoth

from adapters.extraction.bounds import megabytes, release_freed_memory
from adapters.extraction.markup import html_to_markdown
from domain.extraction import ExtractionFailed, ExtractionLimits

# Password-protected Word files and pre-2007 .doc files are OLE compound files, not zips.
_OLE_SIGNATURE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_MAIN_PART = "word/document.xml"
_NOT_DOCX = "The file is not a valid DOCX document."
# mammoth maps Heading 1-6 itself; a document's Title and Subtitle are headings too.
_STYLE_MAP = "p[style-name='Title'] => h1:fresh\np[style-name='Subtitle'] => h2:fresh"
_WORD_COMPRESSION = frozenset({zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED})
# Every entry of a zip's central directory starts with this signature.
_DIRECTORY_ENTRY = b"PK\x01\x02"
_READ_PIECE = 64 * 1024


def is_docx_zip(data: bytes, max_entries: int) -> bool:
    """Whether `data` is a zip holding a Word main document (reads only the zip directory).

    A zip with more than `max_entries` entries is not opened: its directory alone could take
    gigabytes to load.
    """
    if data.count(_DIRECTORY_ENTRY) > max_entries:
        return False
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return _MAIN_PART in archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return False


def docx_to_markdown(data: bytes, limits: ExtractionLimits) -> str:
    """The document's text as Markdown: Word headings become `#` headings, images their alt text.

    The zip directory is read first, then every XML part is inflated and counted without
    being kept, so that a decompression bomb, a part of millions of tiny paragraphs or a zip
    of something else is refused before mammoth parses anything.
    """
    if data.startswith(_OLE_SIGNATURE):
        raise ExtractionFailed(
            "The document is password-protected or in the old Word 97-2003 format, "
            "which cannot be read; save it as an unprotected .docx file."
        )
    if data.count(_DIRECTORY_ENTRY) > limits.max_archive_entries:
        raise ExtractionFailed(
            "The document is too large to process: its zip holds more than "
            f"{limits.max_archive_entries:,} files."
        )
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            _check_parts(archive, limits)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        raise ExtractionFailed(_NOT_DOCX) from None
    try:
        result = mammoth.convert_to_html(
            io.BytesIO(data),
            style_map=_STYLE_MAP,
            convert_image=mammoth.images.img_element(lambda _image: {}),
        )
        markdown = html_to_markdown(result.value)
    finally:
        release_freed_memory()
    if not markdown:
        raise ExtractionFailed("The document contains no text.")
    return markdown


def _check_parts(archive: zipfile.ZipFile, limits: ExtractionLimits) -> None:
    entries = archive.infolist()
    # Word writes only stored and deflated entries; zipfile would inflate a bzip2 or LZMA
    # entry a whole block at a time, whatever is asked of it.
    if any(entry.compress_type not in _WORD_COMPRESSION for entry in entries):
        raise ExtractionFailed(_NOT_DOCX)
    # zipfile never yields more of an entry than its declared size (and fails its CRC check
    # if the data runs short), so the declared sizes bound what mammoth can inflate; they are
    # checked first, then the real size of every XML part is measured as it is read.
    declared = sum(entry.file_size for entry in entries)
    if declared > limits.max_decompressed_bytes:
        _too_large(declared, limits.max_decompressed_bytes)
    if any(entry.file_size > limits.max_stream_bytes for entry in entries):
        _part_too_large(limits.max_stream_bytes)
    if _MAIN_PART not in {entry.filename for entry in entries}:
        raise ExtractionFailed(_NOT_DOCX)
    counter = _XmlCounter(limits.max_markup_elements)
    inflated = 0
    for entry in entries:
        inflated += counter.read(archive, entry, limits)
        if inflated > limits.max_decompressed_bytes:
            _too_large(inflated, limits.max_decompressed_bytes)


class _XmlCounter:
    """Counts the elements of XML parts with expat, building nothing from them.

    A part that is not XML (an image, say) stops being read at its first bytes; mammoth only
    ever parses the XML ones.
    """

    def __init__(self, max_elements: int) -> None:
        self.elements = 0
        self._max_elements = max_elements

    def read(
        self, archive: zipfile.ZipFile, entry: zipfile.ZipInfo, limits: ExtractionLimits
    ) -> int:
        """Inflate and count `entry`; the bytes inflated, or `ExtractionFailed` past a limit."""
        parser = xml.parsers.expat.ParserCreate()
        parser.StartElementHandler = self._element
        parser.StartDoctypeDeclHandler = _refuse_doctype
        parser.EntityDeclHandler = _refuse_doctype
        size = 0
        with archive.open(entry) as part:
            while piece := part.read(_READ_PIECE):
                size += len(piece)
                if size > limits.max_stream_bytes:
                    _part_too_large(limits.max_stream_bytes)
                try:
                    parser.Parse(piece, False)
                except xml.parsers.expat.ExpatError:
                    return size
        return size

    def _element(self, _name: str, _attributes: dict[str, str]) -> None:
        self.elements += 1
        if self.elements > self._max_elements:
            raise ExtractionFailed(
                "The document is too large to process: it has more than "
                f"{self._max_elements:,} paragraphs, runs and other elements."
            )


def _refuse_doctype(*_arguments: object) -> NoReturn:
    raise ExtractionFailed(_NOT_DOCX)


def _too_large(size: int, limit: int) -> NoReturn:
    raise ExtractionFailed(
        f"The document is too large once decompressed: {size:,} bytes is more than "
        f"the limit of {limit:,} bytes."
    )


def _part_too_large(limit: int) -> NoReturn:
    raise ExtractionFailed(
        f"The document is too large once decompressed: one of its parts grows past "
        f"{megabytes(limit)}."
    )
