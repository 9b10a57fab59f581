"""PDF text page by page, and every page rendered to PNG, with pypdfium2; a page without a text
layer (a scan) is rendered again, at `ocr_dpi`, to be read by OCR."""

from __future__ import annotations

import math
import threading

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from adapters.extraction.bounds import release_freed_memory
from adapters.extraction.ocr import MAX_SIDE, OcrRun
from adapters.extraction.pdf_budget import check_pdf_budget
from adapters.extraction.pdf_opening import capped, failure, open_measured
from adapters.extraction.pictures import png_data
from adapters.extraction.text import normalize_newlines, page_marker, text_too_large
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


def extract_pdf(
    data: bytes, limits: ExtractionLimits, ocr: OcrRun | None = None
) -> ExtractedDocument:
    """Each page's text and PNG rendering. A page without text (a scan) is not an error: with
    `ocr`, its text is what OCR reads on it, in its place, while the run's bounds allow.

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
            return _read(pdf, limits, ocr)
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


def _read(
    pdf: pdfium.PdfDocument, limits: ExtractionLimits, ocr: OcrRun | None
) -> ExtractedDocument:
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
            if not text and ocr is not None and ocr.wanted:
                text = _read_scan(page, limits, ocr)
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
    return ExtractedDocument(
        markdown="\n\n".join(sections),
        pages=pages,
        images=images,
        ocr_pages=ocr.pages if ocr is not None else 0,
    )


def _page_text(page: pdfium.PdfPage) -> str:
    textpage = page.get_textpage()
    try:
        raw = textpage.get_text_range()
    finally:
        textpage.close()
    lines = (line.rstrip() for line in normalize_newlines(raw.replace("\x00", "")).split("\n"))
    return "\n".join(lines).strip()


def _read_scan(page: pdfium.PdfPage, limits: ExtractionLimits, ocr: OcrRun) -> str:
    """What OCR reads on `page` rendered in grey at `ocr_dpi`, or smaller when that is more
    than OCR reads (`MAX_SIDE`) or than `max_image_pixels`."""
    width, height = page.get_size()
    wanted = limits.ocr_dpi / _POINTS_PER_INCH
    if max(width, height) > 0:
        wanted = min(wanted, MAX_SIDE / max(width, height))
    scale = _fitting_scale(width, height, wanted, limits.max_image_pixels)
    if scale is None:
        return ""
    bitmap = page.render(scale=scale, grayscale=True)
    try:
        picture = bitmap.to_pil()
        text = ocr.read(picture)
        picture.close()
    finally:
        bitmap.close()
    return text or ""


def _render(page: pdfium.PdfPage, number: int, limits: ExtractionLimits) -> ExtractedImage | None:
    width, height = page.get_size()
    scale = _fitting_scale(
        width, height, limits.page_image_dpi / _POINTS_PER_INCH, limits.max_image_pixels
    )
    if scale is None:
        return None
    bitmap = page.render(scale=scale)
    try:
        picture = bitmap.to_pil()
        data = png_data(picture)
        picture.close()
    finally:
        bitmap.close()
    return ExtractedImage(
        name=f"page-{number:04d}.png", data=data, content_type="image/png", page_number=number
    )


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
