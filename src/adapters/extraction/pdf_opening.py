"""A PDF read with pypdf, and what PDFium inflates while it merely opens it, measured first.

Opening a document (`FPDF_LoadMemDocument64`) already inflates, whole: the cross-reference
streams, the object streams holding the objects it looks up (the catalog, the page tree), and
the catalog's /Metadata stream, which it then parses as XML (`ReportUnsupportedFeatures`).
A few hundred kilobytes can hold gigabytes of any of them. pypdf reads the same file, decrypts
it and decodes every standard filter with a cap on what each filter may output (its
`Configuration`, held in a context variable, so each call and thread has its own caps): its
cross-reference streams while it opens the file, then here every object stream the
cross-reference lists and the catalog's /Metadata, against `max_stream_bytes` each and
`max_decompressed_bytes` together.

A file pypdf cannot read at all is refused as unreadable rather than handed to PDFium
unmeasured.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from pypdf import PasswordType, PdfReader, apply_configuration
from pypdf.errors import (
    DependencyError,
    DeprecationError,
    FileNotDecryptedError,
    LimitReachedError,
    PdfReadError,
    PyPdfError,
)
from pypdf.filters import decode_stream_data
from pypdf.generic import ArrayObject, IndirectObject, NameObject, StreamObject

from adapters.extraction.bounds import megabytes
from domain.extraction import ExtractionFailed, ExtractionLimits

UNREADABLE = "The file is not a readable PDF."
_LOCKED = "The PDF is password-protected; upload a copy without a password."
_SECURITY = "The PDF is encrypted with a security scheme that cannot be read."
# PDFium reads the short names of filters in any stream; pypdf 7 only in inline images.
_FULL_NAMES = {
    "/AHx": "/ASCIIHexDecode",
    "/A85": "/ASCII85Decode",
    "/LZW": "/LZWDecode",
    "/Fl": "/FlateDecode",
    "/RL": "/RunLengthDecode",
    "/CCF": "/CCITTFaxDecode",
    "/DCT": "/DCTDecode",
}


def part_too_large(cap: int) -> str:
    """The message for one stream that inflates past `cap` bytes."""
    return f"This PDF is too large to process: part of it inflates past {megabytes(cap)}."


def document_too_large(limits: ExtractionLimits) -> str:
    """The message for streams that together inflate past `max_decompressed_bytes`."""
    return (
        "This PDF is too large once decompressed: more than the limit of "
        f"{megabytes(limits.max_decompressed_bytes)}."
    )


@contextmanager
def capped(cap: int) -> Iterator[None]:
    """pypdf, within the block, refuses to inflate any stream past `cap` bytes."""
    # 0 would mean "no limit" to pypdf; ASCII85 and ASCIIHex need none, as they only shrink;
    # jbig2dec is an external program, never worth running on a hostile file.
    size = max(cap, 1)
    with apply_configuration(
        jbig2dec_binary=None,
        zlib_maximum_output_length=size,
        lzw_maximum_output_length=size,
        run_length_maximum_output_length=size,
        brotli_maximum_output_length=size,
    ):
        yield


def inflated(stream: StreamObject, cap: int) -> bytes | None:
    """The stream's data decoded, or None if it grows past `cap` bytes.

    A stream pypdf cannot decode (a broken or unknown filter) counts as empty: PDFium cannot
    decode it either, and both give up on such data rather than inflate it.
    """
    _spell_filters_out(stream)
    with capped(cap):
        try:
            data = decode_stream_data(stream)
        except LimitReachedError:
            return None
        except (PyPdfError, DeprecationError, NotImplementedError, ValueError, zlib.error):
            return b""
    return None if len(data) > cap else data


def _spell_filters_out(stream: StreamObject) -> None:
    """Give `stream` (a copy only this check reads) its filters as direct, full names."""
    filters = stream.get("/Filter")
    if filters is None:
        return
    names = filters if isinstance(filters, list) else [filters]
    resolved = [name.get_object() if isinstance(name, IndirectObject) else name for name in names]
    stream[NameObject("/Filter")] = ArrayObject(
        NameObject(_FULL_NAMES.get(str(name), str(name))) for name in resolved
    )


def open_measured(data: bytes, limits: ExtractionLimits) -> PdfReader:
    """`data` read with pypdf, decrypted, once what PDFium inflates to open it is measured.

    Raises `ExtractionFailed` for a file that is unreadable, needs a password, or inflates
    past `limits` as it opens. The caller must keep `capped(limits.max_stream_bytes)` in force
    while it uses the reader, so that what pypdf inflates on its own stays bounded too.
    """
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
    except (NotImplementedError, DependencyError):
        raise ExtractionFailed(_SECURITY) from None
    if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
        raise ExtractionFailed(_LOCKED)
    _measure_opening(reader, limits)
    return reader


def failure(error: Exception, limits: ExtractionLimits) -> ExtractionFailed:
    """The `ExtractionFailed` for an error pypdf raised while reading a file."""
    if isinstance(error, ExtractionFailed):
        return error
    if isinstance(error, FileNotDecryptedError):
        return ExtractionFailed(_LOCKED)
    if isinstance(error, LimitReachedError) and "decompress" in str(error).lower():
        return ExtractionFailed(part_too_large(limits.max_stream_bytes))
    return ExtractionFailed(UNREADABLE)


def _measure_opening(reader: PdfReader, limits: ExtractionLimits) -> None:
    cap = limits.max_stream_bytes
    packed = {number for number, _ in reader.xref_objStm.values()}
    try:
        catalog: object = reader.root_object  # found by a search where the trailer lacks it
    except PdfReadError:
        catalog = None
    if not isinstance(catalog, dict):
        # A cross-reference pypdf could not make sense of: PDFium would rebuild it from every
        # object, so every object stream counts before the file is refused.
        packed |= {number for numbers in reader.xref.values() for number in numbers}
    streams: list[object] = [reader.get_object(number) for number in sorted(packed)]
    if isinstance(catalog, dict):
        streams.append(_resolve(catalog.get("/Metadata")))
    total = 0
    for stream in streams:
        if not isinstance(stream, StreamObject) or (
            not isinstance(catalog, dict) and stream.get("/Type") != "/ObjStm"
        ):
            continue
        decoded = inflated(stream, cap)
        if decoded is None:
            raise ExtractionFailed(part_too_large(cap))
        total += len(decoded)
        if total > limits.max_decompressed_bytes:
            raise ExtractionFailed(document_too_large(limits))
    if not isinstance(catalog, dict):
        raise ExtractionFailed(UNREADABLE)


def _resolve(value: object) -> object:
    return value.get_object() if isinstance(value, IndirectObject) else value
