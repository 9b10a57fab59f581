"""Reads PDF objects: the whole of a PDF that PDFium wrote itself (`read_pdf`, for
`pdf_budget`), or single values anywhere in a raw file (`parse_value`, for `pdf_opening`).

`read_pdf` reads only that one writer's output: objects one after another, each
`N G obj ... endobj`, streams with a direct `/Length`, no object streams, no encryption, a
classic xref table at the end. Anything else raises `MalformedPdf`, so a file this reader does
not understand is never taken as small.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

_WHITESPACE = b"\x00\t\n\x0c\r "
_SKIP_WHITESPACE = re.compile(rb"(?:[\x00\t\n\x0c\r ]|%[^\r\n]*+)*+")
_NAME = re.compile(rb"/([^\x00\t\n\x0c\r /\[\]()<>{}%]*+)")
_NUMBER = re.compile(rb"[+-]?(?:\d+\.?\d*|\.\d+)")
_REFERENCE = re.compile(
    rb"(\d+)[\x00\t\n\x0c\r ]+(\d+)[\x00\t\n\x0c\r ]+R(?![^\x00\t\n\x0c\r /\[\]()<>{}%])"
)
_KEYWORD = re.compile(rb"true|false|null")
_OBJECT_HEADER = re.compile(rb"(\d+)[\x00\t\n\x0c\r ]+(\d+)[\x00\t\n\x0c\r ]+obj")
_STREAM_START = re.compile(rb"stream(?:\r\n|\n)")
_ENDSTREAM = re.compile(rb"[\x00\t\n\x0c\r ]*endstream")
_ENDOBJ = re.compile(rb"endobj")
_STRING_SPECIAL = re.compile(rb"[()\\]")
_HEX_END = re.compile(rb">")
_NAME_ESCAPE = re.compile(rb"#([0-9A-Fa-f]{2})")
# PDFium itself refuses objects nested deeper than 64.
_MAX_DEPTH = 128


class MalformedPdf(Exception):
    """The bytes are not a PDF as PDFium writes one."""


class Name(bytes):
    """A PDF name, its `#xx` escapes decoded (a plain `bytes` value is a string)."""


class Reference(NamedTuple):
    """An indirect reference `number generation R`."""

    number: int
    generation: int


PdfValue = (
    None | bool | int | float | bytes | Name | Reference | list["PdfValue"] | dict[Name, "PdfValue"]
)


@dataclass(frozen=True, slots=True)
class Stream:
    """A stream object: its dictionary and where its (still encoded) data lies in the file."""

    dictionary: dict[Name, PdfValue]
    start: int
    length: int


@dataclass(slots=True)
class PdfFile:
    """Every object of the file by number, and the trailer dictionary."""

    objects: dict[int, PdfValue | Stream]
    trailer: dict[Name, PdfValue]

    def resolve(self, value: PdfValue | Stream) -> PdfValue | Stream:
        """`value`, or the object it refers to (None for a missing one)."""
        for _ in range(32):
            if not isinstance(value, Reference):
                return value
            value = self.objects.get(value.number)
        return None


def read_pdf(data: bytes | bytearray) -> PdfFile:
    """All objects of a PDF written by PDFium's `FPDF_SaveAsCopy`, in one pass."""
    parser = _Parser(data)
    objects: dict[int, PdfValue | Stream] = {}
    position = data.index(b"\n") + 1 if data.startswith(b"%PDF-") else 0
    while True:
        position = parser.skip_whitespace_and_comments(position)
        header = _OBJECT_HEADER.match(data, position)
        if header is None:
            break
        value, position = parser.value(header.end(), 0)
        position = parser.skip_whitespace(position)
        stream_start = _STREAM_START.match(data, position)
        if stream_start is not None:
            if not isinstance(value, dict):
                raise MalformedPdf("a stream without a dictionary")
            length = value.get(Name(b"Length"))
            start = stream_start.end()
            if not isinstance(length, int) or length < 0 or start + length > len(data):
                raise MalformedPdf("a stream without a usable /Length")
            end = _ENDSTREAM.match(data, start + length)
            if end is None:
                raise MalformedPdf("a stream whose /Length is wrong")
            objects[int(header.group(1))] = Stream(value, start, length)
            position = parser.skip_whitespace(end.end())
        else:
            objects[int(header.group(1))] = value
        end_object = _ENDOBJ.match(data, position)
        if end_object is None:
            raise MalformedPdf("an object without endobj")
        position = end_object.end()
    trailer_at = data.find(b"trailer", position)
    if trailer_at < 0:
        raise MalformedPdf("no trailer")
    trailer, _ = parser.value(trailer_at + len(b"trailer"), 0)
    if not isinstance(trailer, dict):
        raise MalformedPdf("a trailer that is not a dictionary")
    return PdfFile(objects, trailer)


class _Parser:
    def __init__(self, data: bytes | bytearray) -> None:
        self._data = data

    def skip_whitespace(self, position: int) -> int:
        match = _SKIP_WHITESPACE.match(self._data, position)
        return match.end() if match else position

    def skip_whitespace_and_comments(self, position: int) -> int:
        while True:
            position = self.skip_whitespace(position)
            if self._data[position : position + 1] != b"%":
                return position
            newline = self._data.find(b"\n", position)
            position = len(self._data) if newline < 0 else newline + 1

    def value(self, position: int, depth: int) -> tuple[PdfValue, int]:
        if depth > _MAX_DEPTH:
            raise MalformedPdf("objects nested too deeply")
        data = self._data
        position = self.skip_whitespace(position)
        lead = data[position : position + 1]
        if lead == b"<":
            if data[position + 1 : position + 2] == b"<":
                return self._dictionary(position + 2, depth)
            end = _HEX_END.search(data, position)
            if end is None:
                raise MalformedPdf("an unterminated hex string")
            digits = bytes(data[position + 1 : end.start()]).translate(None, _WHITESPACE)
            if len(digits) % 2:
                digits += b"0"
            try:
                return bytes.fromhex(digits.decode("ascii")), end.end()
            except (UnicodeDecodeError, ValueError):
                raise MalformedPdf("a bad hex string") from None
        if lead == b"[":
            return self._array(position + 1, depth)
        if lead == b"(":
            return self._string(position + 1)
        if lead == b"/":
            match = _NAME.match(data, position)
            assert match is not None
            return _name(match.group(1)), match.end()
        reference = _REFERENCE.match(data, position)
        if reference is not None:
            return Reference(int(reference.group(1)), int(reference.group(2))), reference.end()
        number = _NUMBER.match(data, position)
        if number is not None:
            text = number.group()
            if b"." in text:
                return float(text), number.end()
            return int(text), number.end()
        keyword = _KEYWORD.match(data, position)
        if keyword is not None:
            word = keyword.group()
            return (None if word == b"null" else word == b"true"), keyword.end()
        raise MalformedPdf(f"an unexpected byte at offset {position}")

    def _dictionary(self, position: int, depth: int) -> tuple[PdfValue, int]:
        data = self._data
        result: dict[Name, PdfValue] = {}
        while True:
            position = self.skip_whitespace(position)
            if data.startswith(b">>", position):
                return result, position + 2
            key = _NAME.match(data, position)
            if key is None:
                raise MalformedPdf(f"a dictionary key expected at offset {position}")
            value, position = self.value(key.end(), depth + 1)
            result[_name(key.group(1))] = value

    def _array(self, position: int, depth: int) -> tuple[PdfValue, int]:
        data = self._data
        result: list[PdfValue] = []
        while True:
            position = self.skip_whitespace(position)
            if data.startswith(b"]", position):
                return result, position + 1
            if position >= len(data):
                raise MalformedPdf("an unterminated array")
            value, position = self.value(position, depth + 1)
            result.append(value)

    def _string(self, position: int) -> tuple[PdfValue, int]:
        """A literal string, its escapes decoded."""
        data = self._data
        start = position
        nesting = 0
        while True:
            special = _STRING_SPECIAL.search(data, position)
            if special is None:
                raise MalformedPdf("an unterminated string")
            position = special.end()
            char = special.group()
            if char == b"\\":
                position += 1
            elif char == b"(":
                nesting += 1
            elif nesting:
                nesting -= 1
            else:
                raw = bytes(data[start : special.start()])
                return (_unescape(raw) if b"\\" in raw else raw), position


_ESCAPE = re.compile(rb"\\(?:([0-7]{1,3})|(\r\n|\r|\n)|(.))", re.DOTALL)
_ESCAPED = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\x0c"}


def _unescape(raw: bytes) -> bytes:
    def replace(match: re.Match[bytes]) -> bytes:
        octal, newline, char = match.groups()
        if octal is not None:
            return bytes((int(octal, 8) & 0xFF,))
        if newline is not None:
            return b""
        return _ESCAPED.get(char, char)

    return _ESCAPE.sub(replace, raw)


def parse_value(data: bytes | bytearray, position: int) -> tuple[PdfValue, int]:
    """The value written at `position` (whitespace and comments before it skipped), and the
    position just after it; `MalformedPdf` when there is none."""
    return _Parser(data).value(position, 0)


def _name(raw: bytes) -> Name:
    if b"#" not in raw:
        return Name(raw)
    return Name(_NAME_ESCAPE.sub(lambda match: bytes.fromhex(match.group(1).decode()), raw))


def decode_name(raw: bytes) -> bytes:
    """A name as written in a content stream, its `#xx` escapes decoded."""
    return _name(raw)
