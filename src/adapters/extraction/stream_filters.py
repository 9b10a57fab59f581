"""PDF stream filters decoded in bounded pieces, so a stream's decoded size can be measured with a
cap instead of being inflated whole as PDFium would.

Each decoder takes the encoded data as an iterator of pieces and yields the decoded data in
pieces of at most about `PIECE` bytes; the caller stops pulling once it has seen enough.
Decoders follow PDFium where it matters for the size: Flate needs the zlib header and stops at
the end of the zlib stream or at the first error, keeping what it decoded before.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from collections.abc import Iterable, Iterator

PIECE = 256 * 1024
_INPUT_PIECE = 64 * 1024
_NOT_HEX = re.compile(rb"[^0-9A-Fa-f]")
_NOT_ASCII85 = re.compile(rb"[^!-uz]")
# Filters that decode images: PDFium leaves their data as it is outside image rendering.
_IMAGE_FILTERS = frozenset(
    {b"DCTDecode", b"DCT", b"JPXDecode", b"CCITTFaxDecode", b"CCF", b"JBIG2Decode"}
)
_FLATE = frozenset({b"FlateDecode", b"Fl"})
_LZW = frozenset({b"LZWDecode", b"LZW"})


class UnsupportedFilter(Exception):
    """A filter chain whose decoded size cannot be bounded here."""


def _pieces(data: bytes | memoryview) -> Iterator[bytes]:
    # No decoder is handed all of the data at once: zlib would inflate it all in one call.
    view = memoryview(data)
    for start in range(0, len(view), _INPUT_PIECE):
        yield bytes(view[start : start + _INPUT_PIECE])


def decode(
    data: bytes | memoryview, filters: list[bytes], parameters: list[object]
) -> Iterator[bytes]:
    """`data` decoded by `filters` in order, in pieces; `parameters` are their DecodeParms.

    A predictor only shrinks what its filter yields, so it is left out when the filter is the
    last one; a predictor before another filter would change what that filter reads, and is
    refused (`UnsupportedFilter`). An image codec stops the chain (PDFium does not decode it
    outside rendering); an unknown filter leaves the data as it is.
    """
    stream: Iterable[bytes] = _pieces(data)
    for index, name in enumerate(filters):
        if name in _IMAGE_FILTERS:
            break
        parameter = parameters[index] if index < len(parameters) else None
        if index < len(filters) - 1 and _has_predictor(parameter):
            raise UnsupportedFilter(name.decode("latin-1"))
        if name in _FLATE:
            stream = _inflate(stream)
        elif name in _LZW:
            stream = _lzw(stream, _early_change(parameter))
        elif name in (b"ASCII85Decode", b"A85"):
            stream = _ascii85(stream)
        elif name in (b"ASCIIHexDecode", b"AHx"):
            stream = _ascii_hex(stream)
        elif name in (b"RunLengthDecode", b"RL"):
            stream = _run_length(stream)
        # Crypt (the data is decrypted already) and unknown filters leave the data unchanged.
    return iter(stream)


def decoded_size(chunks: Iterable[bytes], cap: int) -> int:
    """How many bytes `chunks` yield, counting no further than just past `cap`."""
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > cap:
            break
    return size


def _has_predictor(parameters: object) -> bool:
    if not isinstance(parameters, dict):
        return False
    predictor = parameters.get(b"Predictor", 1)
    return isinstance(predictor, int | float) and predictor > 1


def _early_change(parameters: object) -> bool:
    if not isinstance(parameters, dict):
        return True
    return bool(parameters.get(b"EarlyChange", 1) != 0)


def _inflate(source: Iterable[bytes]) -> Iterator[bytes]:
    inflater = zlib.decompressobj()
    for piece in source:
        pending = piece
        while pending:
            try:
                out = inflater.decompress(pending, PIECE)
            except zlib.error:
                return
            if out:
                yield out
            if inflater.eof:
                return
            pending = inflater.unconsumed_tail
    # Output still held back by the cap on the last call.
    while True:
        try:
            out = inflater.decompress(b"", PIECE)
        except zlib.error:
            return
        if not out:
            return
        yield out


def _ascii_hex(source: Iterable[bytes]) -> Iterator[bytes]:
    carry = b""
    for piece in source:
        end = piece.find(b">")
        digits = carry + _NOT_HEX.sub(b"", piece if end < 0 else piece[:end])
        usable = len(digits) - len(digits) % 2
        if usable:
            yield binascii.unhexlify(digits[:usable])
        carry = digits[usable:]
        if end >= 0:
            break
    if carry:
        yield binascii.unhexlify(carry + b"0")


def _ascii85(source: Iterable[bytes]) -> Iterator[bytes]:
    carry = b""
    for piece in source:
        end = piece.find(b"~")
        # "z" stands for four zero bytes; spelled out, every group is five characters long.
        text = carry + _NOT_ASCII85.sub(b"", piece if end < 0 else piece[:end]).replace(
            b"z", b"!!!!!"
        )
        usable = len(text) - len(text) % 5
        try:
            for start in range(0, usable, PIECE):
                yield base64.a85decode(text[start : min(start + PIECE, usable)])
        except ValueError:  # a group beyond 2**32: the data ends there
            return
        carry = text[usable:]
        if end >= 0:
            break
    if len(carry) > 1:
        try:
            yield base64.a85decode(carry)  # a short last group
        except ValueError:
            return


def _run_length(source: Iterable[bytes]) -> Iterator[bytes]:
    out = bytearray()
    data = b""
    for piece in source:
        data += piece
        position = 0
        while position < len(data):
            length = data[position]
            if length == 128:
                if out:
                    yield bytes(out)
                return
            if length < 128:
                if position + length + 2 > len(data):
                    break
                out += data[position + 1 : position + length + 2]
                position += length + 2
            else:
                if position + 1 >= len(data):
                    break
                out += data[position + 1 : position + 2] * (257 - length)
                position += 2
            if len(out) >= PIECE:
                yield bytes(out)
                out.clear()
        data = data[position:]
    if out:
        yield bytes(out)


def _lzw(source: Iterable[bytes], early_change: bool) -> Iterator[bytes]:
    """LZW as PDFium decodes it: 9 to 12-bit codes, 256 resets the table, 257 ends the data."""
    early = 1 if early_change else 0
    table: list[bytes] = []
    previous: bytes | None = None
    code_length = 9
    bits = 0
    bit_count = 0
    out = bytearray()
    for piece in source:
        for byte in piece:
            bits = (bits << 8) | byte
            bit_count += 8
            if bit_count < code_length:
                continue
            bit_count -= code_length
            code = bits >> bit_count
            bits &= (1 << bit_count) - 1
            if code == 256:
                table.clear()
                previous = None
                code_length = 9
                continue
            if code == 257:
                if out:
                    yield bytes(out)
                return
            if code < 256:
                entry = bytes((code,))
            elif code - 258 < len(table):
                entry = table[code - 258]
            elif previous is not None:
                # PDFium reads every code past the table as the one about to be added.
                entry = previous + previous[:1]
            else:
                if out:
                    yield bytes(out)
                return
            out += entry
            if previous is not None and len(table) + early < 4094:
                table.append(previous + entry[:1])
                size = len(table) + early
                code_length = 10 if size >= 254 else 9
                code_length = 11 if size >= 766 else code_length
                code_length = 12 if size >= 1790 else code_length
            previous = entry
            if len(out) >= PIECE:
                yield bytes(out)
                out.clear()
    if out:
        yield bytes(out)
