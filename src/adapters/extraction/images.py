"""Recognising PNG, JPEG, GIF and WebP files and reading their size from the header alone."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from domain.extraction import ExtractedDocument, ExtractedImage, ExtractionFailed, ExtractionLimits


@dataclass(frozen=True, slots=True)
class ImageKind:
    """One supported image format: its content type and the extension of its stored copy."""

    content_type: str
    extension: str


PNG = ImageKind("image/png", "png")
JPEG = ImageKind("image/jpeg", "jpg")
GIF = ImageKind("image/gif", "gif")
WEBP = ImageKind("image/webp", "webp")

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers carry the dimensions; C4, C8 and CC are other segments.
_JPEG_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Markers that stand alone, without a length field: TEM, RST0-7, SOI and EOI.
_JPEG_STANDALONE_MARKERS = frozenset({0x01, *range(0xD0, 0xDA)})


def image_kind(data: bytes) -> ImageKind | None:
    """The image format that `data` starts with, if it is one this adapter supports."""
    if data.startswith(_PNG_SIGNATURE):
        return PNG
    if data.startswith(b"\xff\xd8\xff"):
        return JPEG
    if data.startswith((b"GIF87a", b"GIF89a")):
        return GIF
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return WEBP
    return None


def image_size(data: bytes, kind: ImageKind) -> tuple[int, int] | None:
    """Width and height in pixels from the header, or None when the header is unreadable."""
    try:
        if kind is PNG:
            return _png_size(data)
        if kind is GIF:
            width, height = struct.unpack("<HH", data[6:10])
            return width, height
        if kind is JPEG:
            return _jpeg_size(data)
        return _webp_size(data)
    except (struct.error, IndexError):
        return None


def extract_image(data: bytes, limits: ExtractionLimits) -> ExtractedDocument:
    """An uploaded image: no text, the image itself kept once its size is known to be sane."""
    kind = image_kind(data)
    size = image_size(data, kind) if kind is not None else None
    if kind is None or size is None or size[0] <= 0 or size[1] <= 0:
        raise ExtractionFailed("The file is not a readable PNG, JPEG, GIF or WebP image.")
    width, height = size
    if width * height > limits.max_image_pixels:
        raise ExtractionFailed(
            f"The image is too large: {width} x {height} pixels is more than the limit of "
            f"{limits.max_image_pixels:,} pixels."
        )
    image = ExtractedImage(
        name=f"image.{kind.extension}", data=data, content_type=kind.content_type
    )
    return ExtractedDocument(markdown="", pages=[], images=[image])


def _png_size(data: bytes) -> tuple[int, int] | None:
    if data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    position = 2
    while position + 4 <= len(data):
        if data[position] != 0xFF:
            return None
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte before a marker
            position += 1
            continue
        if marker in _JPEG_STANDALONE_MARKERS:
            position += 2
            continue
        (length,) = struct.unpack(">H", data[position + 2 : position + 4])
        if marker in _JPEG_SOF_MARKERS:
            height, width = struct.unpack(">HH", data[position + 5 : position + 9])
            return width, height
        if marker == 0xDA or length < 2:  # image data begins before any frame header
            return None
        position += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    if len(data) < 30:
        return None
    chunk = data[12:16]
    if chunk == b"VP8 ":
        if data[23:26] != b"\x9d\x01\x2a":
            return None
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L":
        if data[20] != 0x2F:
            return None
        (bits,) = struct.unpack("<I", data[21:25])
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    return None
