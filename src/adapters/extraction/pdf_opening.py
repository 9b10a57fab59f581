"""What PDFium inflates while it merely opens a PDF, measured before it does.

Opening a document (`FPDF_LoadMemDocument64`) already inflates, whole: the cross-reference
streams, the object streams holding the objects it looks up (the catalog, the page tree), and
the catalog's /Metadata stream, which it then parses as XML (`ReportUnsupportedFeatures`),
about eight bytes of memory per byte inflated. A few hundred kilobytes can hold gigabytes of
any of them, so they are found in the raw file and inflated here with a cap first: every
stream whose dictionary says /XRef or /ObjStm (PDFium reads no other as such), every stream
that a /Metadata key refers to anywhere (the raw file or an object stream), and, to be safe,
every stream whose dictionary or object header cannot be read (by every chain of filters that
inflates). Encrypted files are decrypted as PDFium would (`pdf_encryption`). The scan looks
at more than PDFium does (old revisions, unreachable objects), never at less.
"""

from __future__ import annotations

import bisect
import re
from array import array
from collections.abc import Iterator
from dataclasses import dataclass

from adapters.extraction.bounds import megabytes
from adapters.extraction.pdf_encryption import StreamDecryptor
from adapters.extraction.pdf_objects import MalformedPdf, Name, PdfValue, Reference, parse_value
from adapters.extraction.stream_filters import UnsupportedFilter, decode
from domain.extraction import ExtractionFailed, ExtractionLimits

_WHITESPACE = rb"[\x00\t\n\x0c\r ]"
_DELIMITED = rb"(?![^\x00\t\n\x0c\r /\[\]()<>{}%])"
_OBJ = re.compile(rb"obj" + _DELIMITED)
# The numbers before "obj", looked for in the few bytes before it: a stream whose header hides
# behind comments or long blanks is not attributed to an object, and is measured whatever its
# dictionary says.
_NUMBERS_BEFORE_OBJ = re.compile(
    rb"(?<!\d)(\d{1,10})" + _WHITESPACE + rb"{1,8}(\d{1,5})" + _WHITESPACE + rb"{1,8}\Z"
)
_HEADER_WINDOW = 40
_STREAM = re.compile(rb"(?<!end)stream" + _DELIMITED)
_STREAM_AFTER_DICTIONARY = re.compile(
    rb"(?:" + _WHITESPACE + rb"|%[^\r\n]*+)*+stream(?:\r\n|\n|\r)?"
)
_ENDSTREAM = re.compile(rb"endstream")
# The name /Metadata, each letter of it as itself or as the #xx escape PDFium decodes.
_METADATA = re.compile(
    b"/"
    + b"".join(
        b"(?:%s|#%s[%s%s])"
        % (bytes((char,)), b"%x" % (char >> 4), b"%x" % (char & 15), b"%X" % (char & 15))
        for char in b"Metadata"
    )
    + _DELIMITED
)
# Far more objects or streams than any real document has: refused rather than scanned.
_MAX_OBJECTS = 2_000_000
_MAX_STREAMS = 500_000
_TOO_MANY = "This PDF is too large to process: it holds more than {:,} {}."


@dataclass(frozen=True, slots=True)
class _RawStream:
    number: int  # -1 when no object header stands before it
    generation: int
    dictionary: dict[Name, PdfValue] | None  # None when it cannot be read
    start: int
    end: int  # where the data ends at the latest


def check_before_opening(data: bytes, limits: ExtractionLimits) -> None:
    """Raise `ExtractionFailed` if opening `data` would make PDFium inflate a stream past
    `limits.max_stream_bytes`, or all of them together past `limits.max_decompressed_bytes`."""
    streams = list(_streams(data))
    by_number: dict[int, list[_RawStream]] = {}
    for stream in streams:
        by_number.setdefault(stream.number, []).append(stream)
    budget = _Budget(data, _decryptor(data, streams), limits)
    metadata: set[int] = set(_metadata_references(data))
    for stream in streams:
        kind = stream.dictionary.get(Name(b"Type")) if stream.dictionary is not None else None
        if kind == b"XRef":
            budget.measure(stream, encrypted=False)  # never encrypted
        elif kind == b"ObjStm" or stream.dictionary is None or stream.number < 0:
            for text in budget.readings(stream):
                metadata.update(_metadata_references(text))
    for number in metadata:
        for stream in by_number.get(number, []):
            budget.readings(stream)


class _Budget:
    """Inflates streams against the limits, adding up what they grow to."""

    def __init__(
        self, data: bytes, decryptor: StreamDecryptor | None, limits: ExtractionLimits
    ) -> None:
        self._data = data
        self._decryptor = decryptor
        self._limits = limits
        self._total = 0

    def readings(self, stream: _RawStream) -> list[bytes]:
        """The stream decoded as it is and, in an encrypted file, decrypted: PDFium leaves some
        streams unencrypted (metadata, with /EncryptMetadata false), so both readings count."""
        readings = [self.measure(stream, encrypted=False)]
        if self._decryptor is not None and stream.number >= 0:
            readings.append(self.measure(stream, encrypted=True))
        return readings

    def measure(self, stream: _RawStream, *, encrypted: bool) -> bytes:
        decoded = _inflated(
            self._data, stream, self._decryptor if encrypted else None, self._limits
        )
        self._total += len(decoded)
        if self._total > self._limits.max_decompressed_bytes:
            raise ExtractionFailed(
                "This PDF is too large once decompressed: more than the limit of "
                f"{megabytes(self._limits.max_decompressed_bytes)}."
            )
        return decoded


def _streams(data: bytes) -> Iterator[_RawStream]:
    """Every stream of the raw file, with the header and dictionary in front of it."""
    header_ends, numbers, generations = array("q"), array("q"), array("q")
    for obj in _OBJ.finditer(data):
        header = _NUMBERS_BEFORE_OBJ.search(data, max(0, obj.start() - _HEADER_WINDOW), obj.start())
        if header is None:
            continue
        if len(header_ends) >= _MAX_OBJECTS:
            raise ExtractionFailed(_TOO_MANY.format(_MAX_OBJECTS, "objects"))
        header_ends.append(obj.end())
        numbers.append(int(header.group(1)))
        generations.append(int(header.group(2)))
    position = 0
    count = 0
    while (keyword := _STREAM.search(data, position)) is not None:
        count += 1
        if count > _MAX_STREAMS:
            raise ExtractionFailed(_TOO_MANY.format(_MAX_STREAMS, "streams"))
        index = bisect.bisect_right(header_ends, keyword.start()) - 1
        number, generation = (numbers[index], generations[index]) if index >= 0 else (-1, 0)
        dictionary: PdfValue = None
        start = None
        if index >= 0 and header_ends[index] >= position:
            try:
                dictionary, after = parse_value(data, header_ends[index])
                opening = _STREAM_AFTER_DICTIONARY.match(data, after)
                if opening is not None and opening.start() <= keyword.start() < opening.end():
                    start = opening.end()
            except (MalformedPdf, RecursionError, ValueError):
                dictionary = None
        if not isinstance(dictionary, dict) or start is None:
            dictionary = None
            number = number if index >= 0 and header_ends[index] >= position else -1
            start = keyword.end()
            for newline in (b"\r\n", b"\n", b"\r"):
                if data.startswith(newline, start):
                    start += len(newline)
                    break
        end = _ENDSTREAM.search(data, start)
        first_end = len(data) if end is None else end.start()
        stop = first_end
        length = dictionary.get(Name(b"Length")) if dictionary is not None else None
        if isinstance(length, int) and not isinstance(length, bool) and length > 0:
            # A stream may hold the bytes "endstream" itself; its /Length then reaches further.
            stop = max(stop, min(start + length, len(data)))
        yield _RawStream(number, generation, dictionary, start, stop)
        # The search goes on from the first "endstream", never from where a /Length (which
        # could claim the rest of the file) says: more is looked at, nothing is skipped.
        position = max(first_end, keyword.end())


def _decryptor(data: bytes, streams: list[_RawStream]) -> StreamDecryptor | None:
    """The document's decryptor, from the last trailer or cross-reference stream naming one."""
    trailers: list[dict[Name, PdfValue]] = []
    position = 0
    while (found := data.find(b"trailer", position)) >= 0:
        position = found + len(b"trailer")
        try:
            trailer, _ = parse_value(data, position)
        except (MalformedPdf, RecursionError, ValueError):
            continue
        if isinstance(trailer, dict):
            trailers.append(trailer)
    trailers += [
        stream.dictionary
        for stream in streams
        if stream.dictionary is not None and stream.dictionary.get(Name(b"Type")) == b"XRef"
    ]
    for trailer in reversed(trailers):
        encrypt = trailer.get(Name(b"Encrypt"))
        if encrypt is None:
            continue
        if isinstance(encrypt, Reference):
            encrypt = _object_value(data, encrypt.number)
        identifiers = trailer.get(Name(b"ID"))
        first_id = identifiers[0] if isinstance(identifiers, list) and identifiers else b""
        if isinstance(encrypt, dict) and isinstance(first_id, bytes):
            return StreamDecryptor.for_document(encrypt, bytes(first_id))
        return None  # PDFium reads the newest trailer only
    return None


def _object_value(data: bytes, number: int) -> PdfValue:
    """The last definition of object `number` in the raw file, if it can be read."""
    found: PdfValue = None
    header = rb"(?<!\d)%d" % number + _WHITESPACE + rb"++\d{1,5}" + _WHITESPACE + rb"++obj"
    for match in re.finditer(header, data):
        try:
            found, _ = parse_value(data, match.end())
        except (MalformedPdf, RecursionError, ValueError):
            continue
    return found


def _inflated(
    data: bytes, stream: _RawStream, decryptor: StreamDecryptor | None, limits: ExtractionLimits
) -> bytes:
    """The stream decoded, or `ExtractionFailed` if it grows past `limits.max_stream_bytes`.

    When its filters cannot be told (its dictionary cannot be read, or they are indirect), it
    is decoded by each chain of filters that can inflate, and the largest result counts.
    """
    raw: bytes | memoryview = memoryview(data)[stream.start : stream.end]
    if decryptor is not None:
        raw = decryptor.decrypt(stream.number, stream.generation, bytes(raw))
    dictionary = stream.dictionary or {}
    filters = dictionary.get(Name(b"Filter"))
    names = filters if isinstance(filters, list) else [filters]
    parameters = dictionary.get(Name(b"DecodeParms"))
    values: list[object] = list(parameters) if isinstance(parameters, list) else [parameters]
    chains = [[bytes(name) for name in names if isinstance(name, bytes)]]
    if stream.dictionary is None or any(isinstance(name, Reference) for name in names):
        chains, values = _INFLATING_CHAINS, []
    largest = b""
    for chain in chains:
        decoded = _decoded(raw, chain, values, limits.max_stream_bytes)
        if len(decoded) > len(largest):
            largest = decoded
    return largest


_INFLATING_CHAINS = [
    [b"FlateDecode"],
    [b"LZWDecode"],
    [b"RunLengthDecode"],
    *(
        [first, second]
        for first in (b"ASCII85Decode", b"ASCIIHexDecode")
        for second in (b"FlateDecode", b"LZWDecode", b"RunLengthDecode")
    ),
]


def _decoded(raw: bytes | memoryview, chain: list[bytes], values: list[object], cap: int) -> bytes:
    pieces: list[bytes] = []
    size = 0
    try:
        for piece in decode(raw, chain, values):
            size += len(piece)
            if size > cap:
                raise ExtractionFailed(
                    f"This PDF is too large to process: part of it inflates past {megabytes(cap)}."
                )
            pieces.append(piece)
    except UnsupportedFilter:
        raise ExtractionFailed("The file is not a readable PDF.") from None
    return b"".join(pieces)


def _metadata_references(text: bytes) -> Iterator[int]:
    """The objects a /Metadata key refers to in `text`, however the key is spelled."""
    for key in _METADATA.finditer(text):
        try:
            value, _ = parse_value(text, key.end())
        except (MalformedPdf, RecursionError, ValueError):
            continue
        if isinstance(value, Reference):
            yield value.number
