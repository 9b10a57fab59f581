"""PDF text page by page, and every page rendered to PNG, with pypdfium2."""

from __future__ import annotations

import io
import math
import threading

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image, ImageChops

from adapters.extraction.bounds import release_freed_memory
from adapters.extraction.pdf_budget import check_pdf_budget
from adapters.extraction.pdf_opening import capped, failure, open_measured
from adapters.extraction.text import normalize_newlines, text_too_large
from domain.extraction import (
    ExtractedDocument,
    ExtractedImage,
    ExtractedPage,
    ExtractionFailed,
    ExtractionLimits,
)

# PDFium is not thread-safe, not even across documents, and callers extract in worker threads.
_PDFIUM_LOCK = threading.Lock()
_POINTS_PER_INCH = 72
_SCALE_STEPS = 10
# zlib's fastest level: about half the encoding time of the default (6) for 15% more bytes,
# and encoding is most of the cost of a page image.
_PNG_COMPRESS_LEVEL = 1


def page_marker(number: int) -> str:
    """The line that opens page `number` in the Markdown; an HTML comment renders as nothing."""
    return f"<!-- page {number} -->"


def extract_pdf(data: bytes, limits: ExtractionLimits) -> ExtractedDocument:
    """Each page's text and PNG rendering; a page without text (a scan) is not an error.

    What PDFium inflates to open the file (`open_measured`) and what its pages grow to
    (`check_pdf_budget`) are measured first with pypdf, so a stream or page that would take
    gigabytes fails the file before PDFium allocates them.
    """
    _check(data, limits)
    with _PDFIUM_LOCK:
        try:
            pdf = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as error:
            raise ExtractionFailed(_open_failure(error.err_code)) from None
        try:
            return _read(pdf, limits)
        finally:
            pdf.close()
            release_freed_memory()


def _check(data: bytes, limits: ExtractionLimits) -> None:
    with capped(limits.max_stream_bytes):
        try:
            check_pdf_budget(open_measured(data, limits), limits)
        # pypdf meets hostile files with any error at all; each one means "not measurable".
        except Exception as error:
            raise failure(error, limits) from None


def _open_failure(err_code: int | None) -> str:
    if err_code == pdfium_c.FPDF_ERR_PASSWORD:
        return "The PDF is password-protected; upload a copy without a password."
    if err_code == pdfium_c.FPDF_ERR_SECURITY:
        return "The PDF is encrypted with a security scheme that cannot be read."
    if err_code == pdfium_c.FPDF_ERR_SUCCESS:
        return "The PDF has no pages."
    return "The file is not a readable PDF."


def _read(pdf: pdfium.PdfDocument, limits: ExtractionLimits) -> ExtractedDocument:
    count = len(pdf)
    if count > limits.max_pages:
        raise ExtractionFailed(
            f"The PDF has {count:,} pages, more than the limit of {limits.max_pages:,}."
        )
    pages: list[ExtractedPage] = []
    images: list[ExtractedImage] = []
    sections: list[str] = []
    total_chars = 0
    for number in range(1, count + 1):
        page = pdf[number - 1]
        try:
            text = _page_text(page)
            total_chars += len(text)
            if total_chars > limits.max_text_chars:
                raise ExtractionFailed(text_too_large(limits.max_text_chars))
            image = _render(page, number, limits)
        finally:
            page.close()
        pages.append(ExtractedPage(number=number, text=text))
        if image is not None:
            images.append(image)
        if text:
            sections.append(f"{page_marker(number)}\n\n{text}")
    return ExtractedDocument(markdown="\n\n".join(sections), pages=pages, images=images)


def _page_text(page: pdfium.PdfPage) -> str:
    textpage = page.get_textpage()
    try:
        raw = textpage.get_text_range()
    finally:
        textpage.close()
    lines = (line.rstrip() for line in normalize_newlines(raw.replace("\x00", "")).split("\n"))
    return "\n".join(lines).strip()


def _render(page: pdfium.PdfPage, number: int, limits: ExtractionLimits) -> ExtractedImage | None:
    width, height = page.get_size()
    scale = _fitting_scale(
        width, height, limits.page_image_dpi / _POINTS_PER_INCH, limits.max_image_pixels
    )
    if scale is None:
        return None
    bitmap = page.render(scale=scale)
    try:
        picture = _without_redundant_channels(bitmap.to_pil())
        png = io.BytesIO()
        picture.save(png, format="PNG", compress_level=_PNG_COMPRESS_LEVEL)
        picture.close()
    finally:
        bitmap.close()
    return ExtractedImage(
        name=f"page-{number:04d}.png",
        data=png.getvalue(),
        content_type="image/png",
        page_number=number,
    )


def _without_redundant_channels(picture: Image.Image) -> Image.Image:
    """A grey-scale copy of an RGB rendering whose three channels are equal (a page without
    colour: the same pixels, a third of the data to compress), else the rendering itself."""
    if picture.mode != "RGB":
        return picture
    red, green, blue = picture.split()
    if ImageChops.difference(red, green).getbbox() or ImageChops.difference(green, blue).getbbox():
        return picture
    picture.close()
    return red


def _fitting_scale(width: float, height: float, scale: float, max_pixels: int) -> float | None:
    """`scale`, or a smaller one, close to the largest, whose bitmap stays within `max_pixels`.

    None when the page has no area or cannot be drawn that small.
    """
    if width <= 0 or height <= 0 or scale <= 0:
        return None

    def pixels(candidate: float) -> int:
        return math.ceil(width * candidate) * math.ceil(height * candidate)

    if pixels(scale) <= max_pixels:
        return scale
    # The largest s with (w*s + 1) * (h*s + 1) <= max_pixels: a bound on the rounded-up size.
    area, sides = width * height, width + height
    discriminant = sides * sides - 4 * area * (1 - max_pixels)
    candidate = (math.sqrt(max(discriminant, 0)) - sides) / (2 * area)
    for _ in range(_SCALE_STEPS):
        if candidate <= 0:
            return None
        if pixels(candidate) <= max_pixels:
            return candidate
        candidate *= 0.999  # floating-point rounding only
    return None
