"""Images: recognising PNG, JPEG, GIF, WebP and TIFF files, checking their size from the header
before any pixel is decoded, and reading their text by OCR.

A PNG, JPEG, GIF or WebP is one page (GIF and WebP: their first frame), kept as it is; a TIFF
has a page a frame, each kept as a PNG (browsers show no TIFF). A picture that cannot be
decoded past its header is a page without text: the file completes with what it has.
"""

from __future__ import annotations

import io
import numbers
import struct
from dataclasses import dataclass

from PIL import Image

from adapters.extraction.ocr import MAX_SIDE, OcrRun
from adapters.extraction.pictures import WIDE_MODES, eight_bit, png_data
from adapters.extraction.text import page_marker
from domain.extraction import (
    ExtractedDocument,
    ExtractedImage,
    ExtractedPage,
    ExtractionFailed,
    ExtractionLimits,
)


@dataclass(frozen=True, slots=True)
class ImageKind:
    """One supported image format: its content type and the extension of its stored copy."""

    content_type: str
    extension: str


PNG = ImageKind("image/png", "png")
JPEG = ImageKind("image/jpeg", "jpg")
GIF = ImageKind("image/gif", "gif")
WEBP = ImageKind("image/webp", "webp")
TIFF = ImageKind("image/tiff", "tiff")

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
    if data.startswith((b"II*\x00", b"MM\x00*")):
        return TIFF
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


def extract_image(
    data: bytes, limits: ExtractionLimits, ocr: OcrRun | None = None
) -> ExtractedDocument:
    """An uploaded image, kept once its size is known to be sane; with `ocr`, its text is what
    OCR reads on it, as page 1 (a TIFF: a page a frame). Without, it has no text."""
    kind = image_kind(data)
    if kind is TIFF:
        return _extract_tiff(data, limits, ocr)
    size = image_size(data, kind) if kind is not None else None
    if kind is None or size is None or size[0] <= 0 or size[1] <= 0:
        raise ExtractionFailed("The file is not a readable PNG, JPEG, GIF or WebP image.")
    _check_size(*size, limits)
    image = ExtractedImage(
        name=f"image.{kind.extension}", data=data, content_type=kind.content_type
    )
    if ocr is None:
        return ExtractedDocument(markdown="", pages=[], images=[image])
    text = ""
    if ocr.wanted:
        picture = _decoded(data, draft=kind is JPEG)
        if picture is not None:
            text = ocr.read(picture) or ""
            picture.close()
    return _document([text], [image], ocr)


def _check_size(width: int, height: int, limits: ExtractionLimits) -> None:
    if width * height > limits.max_image_pixels:
        raise ExtractionFailed(
            f"The image is too large: {width} x {height} pixels is more than the limit of "
            f"{limits.max_image_pixels:,} pixels."
        )


def _decoded(data: bytes, *, draft: bool) -> Image.Image | None:
    """The picture's pixels (a JPEG's decoded at the smallest scale OCR reads as well), or None
    when they cannot be decoded: a damaged or truncated body behind a sound header."""
    try:
        picture = Image.open(io.BytesIO(data))
        if draft:
            picture.draft("RGB", (MAX_SIDE, MAX_SIDE))
        picture.load()
    # Pillow's decoders fail in their own ways on damaged pixels; any failure means "none".
    except Exception:
        return None
    return picture


def _extract_tiff(data: bytes, limits: ExtractionLimits, ocr: OcrRun | None) -> ExtractedDocument:
    """A TIFF's frames, each a page: every frame's size is checked before any is decoded."""
    unreadable = ExtractionFailed("The file is not a readable TIFF image.")
    try:
        tiff = Image.open(io.BytesIO(data))
    except Exception:
        raise unreadable from None
    sizes = _frame_sizes(tiff, limits.max_pages)
    if len(sizes) > limits.max_pages:
        raise ExtractionFailed(
            f"The TIFF has more than {limits.max_pages:,} pages, the limit for one file."
        )
    for width, height in sizes:
        if width <= 0 or height <= 0:
            raise unreadable
        _check_size(width, height, limits)
    count = len(sizes)
    texts: list[str] = []
    images: list[ExtractedImage] = []
    for index in range(count):
        text = ""
        if _loaded(tiff, index):
            if ocr is not None and ocr.wanted:
                text = ocr.read(tiff) or ""
            images.append(_page_image(tiff, index + 1, limits))
        texts.append(text)
    if ocr is None:
        pages = [ExtractedPage(number=n, text="") for n in range(1, count + 1)]
        return ExtractedDocument(markdown="", pages=pages, images=images)
    return _document(texts, images, ocr)


def _frame_sizes(tiff: Image.Image, limit: int) -> list[tuple[int, int]]:
    """The sizes of the frames whose headers read, in order, up to one past `limit` (no pixel
    is decoded); a damaged header ends them: the frames before it are the pages."""
    sizes = [tiff.size]
    while len(sizes) <= limit:
        try:
            tiff.seek(len(sizes))
        # EOFError past the last frame; any other error is a damaged frame header.
        except Exception:
            break
        sizes.append(tiff.size)
    return sizes


def _loaded(tiff: Image.Image, index: int) -> bool:
    """Whether frame `index` decodes (it is then the picture `tiff` holds)."""
    try:
        tiff.seek(index)
        tiff.load()
    # A damaged frame is a page without text or image; the others are still read.
    except Exception:
        return False
    return True


def _page_image(frame: Image.Image, number: int, limits: ExtractionLimits) -> ExtractedImage:
    """A frame as the PNG of its page: at `page_image_dpi` when the frame says its resolution,
    within `MAX_SIDE` pixels a side either way."""
    width, height = frame.size
    scale = min(1.0, MAX_SIDE / max(width, height))
    dpi = frame.info.get("dpi")
    if isinstance(dpi, tuple) and dpi and isinstance(dpi[0], numbers.Real) and float(dpi[0]) > 0:
        scale = min(scale, limits.page_image_dpi / float(dpi[0]))
    if frame.mode in WIDE_MODES:
        picture = eight_bit(frame)
    elif frame.mode == "1" and scale < 1.0:
        picture = frame.convert("L")
    elif frame.mode in ("1", "L", "LA", "RGB", "RGBA"):
        picture = frame
    else:
        picture = frame.convert("RGB")
    if scale < 1.0:
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        smaller = picture.resize(size, Image.Resampling.BILINEAR, reducing_gap=2.0)
        if picture is not frame:
            picture.close()
        picture = smaller
    data = png_data(picture)
    if picture is not frame:
        picture.close()
    return ExtractedImage(
        name=f"page-{number:04d}.png", data=data, content_type="image/png", page_number=number
    )


def _document(texts: list[str], images: list[ExtractedImage], ocr: OcrRun) -> ExtractedDocument:
    """Pages of the texts OCR read (numbered from 1), with a page marker before each text."""
    pages = [ExtractedPage(number=n, text=text) for n, text in enumerate(texts, start=1)]
    markdown = "\n\n".join(
        f"{page_marker(page.number)}\n\n{page.text}" for page in pages if page.text
    )
    return ExtractedDocument(markdown=markdown, pages=pages, images=images, ocr_pages=ocr.pages)


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
