"""OCR with the models RapidOCR ships: images (PNG, JPEG, a two-page TIFF) and a scanned PDF
page are read, offline, and cited by page; what OCR cannot read leaves a page without text.

One engine serves the module (loading it takes a second or two, each page about one more), with
every network connection refused from before it loads: a download attempt would fail a test.
"""

from __future__ import annotations

import io
import os
import socket
import struct
from collections.abc import Iterator

import pytest
from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont

from adapters.extraction.extractor import FileTextExtractor
from adapters.extraction.ocr import RapidOcrReader, rapidocr_installed
from adapters.extraction.sandbox import SandboxedTextExtractor
from application.ports.text_extractor import ExtractorCrashed
from domain.extraction import ExtractedDocument, ExtractionFailed, ExtractionLimits

pytestmark = pytest.mark.skipif(not rapidocr_installed(), reason="rapidocr is not installed")

LIMITS = ExtractionLimits()


def text_picture(lines: list[str], size: tuple[int, int] = (1000, 260)) -> Image.Image:
    """Black lines of text, 48 pixels high, on white: what a scanner gives of a printed page."""
    picture = Image.new("L", size, 255)
    draw = ImageDraw.Draw(picture)
    font = ImageFont.load_default(size=48)
    for row, line in enumerate(lines):
        draw.text((40, 40 + row * 90), line, fill=0, font=font)
    return picture


def encoded(picture: Image.Image, format_name: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    picture.save(buffer, format=format_name, **options)
    return buffer.getvalue()


def text_png(lines: list[str]) -> bytes:
    return encoded(text_picture(lines), "PNG", optimize=True)


def scanned_pdf(typed: str, scanned: list[str]) -> bytes:
    """Two A4 pages: `typed` as text, then `scanned` only as a picture (no text layer)."""
    document = FPDF(unit="pt", format="A4")
    document.set_font("helvetica", size=12)
    document.add_page()
    document.multi_cell(0, 16, typed)
    document.add_page()
    document.image(io.BytesIO(text_png(scanned)), x=40, y=40, w=500)
    return bytes(document.output())


def words(text: str) -> set[str]:
    return set(text.lower().split())


class Network:
    """Refuses every connection and records who tried (RapidOCR's downloads included)."""

    def __init__(self) -> None:
        self.attempts: list[object] = []

    def refuse(self, *args: object, **kwargs: object) -> None:
        self.attempts.append(args or kwargs)
        raise OSError("no network in this test")


@pytest.fixture(scope="module")
def network() -> Iterator[Network]:
    from rapidocr.utils import download_file

    network = Network()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", network.refuse)
        patch.setattr(socket.socket, "connect_ex", network.refuse)
        patch.setattr(socket, "create_connection", network.refuse)
        patch.setattr(download_file.DownloadFile, "run", network.refuse)
        yield network


@pytest.fixture(scope="module")
def ocr(network: Network) -> FileTextExtractor:
    """The extractor the sandbox runs, its models loaded with the network refused."""
    extractor = FileTextExtractor(RapidOcrReader())
    warm = extractor.extract(
        text_png(["warm"]), content_type="image/png", file_name="w.png", limits=LIMITS
    )
    assert warm.ocr_pages == 1
    return extractor


def extract(
    extractor: FileTextExtractor,
    data: bytes,
    content_type: str,
    limits: ExtractionLimits = LIMITS,
) -> ExtractedDocument:
    return extractor.extract(data, content_type=content_type, file_name="scan", limits=limits)


def test_the_shipped_models_load_and_read_with_no_network_and_no_download(ocr, network):
    document = extract(ocr, text_png(["Quarterly zebra report"]), "image/png")

    assert {"quarterly", "zebra", "report"} <= words(document.markdown)
    assert network.attempts == []


def test_a_png_is_read_as_page_one_and_kept_as_it_is(ocr, network):
    data = text_png(["Lighthouse keeper", "stays awake"])

    document = extract(ocr, data, "image/png")

    (page,) = document.pages
    assert page.number == 1 and {"lighthouse", "keeper", "stays", "awake"} <= words(page.text)
    assert document.markdown == f"<!-- page 1 -->\n\n{page.text}"
    assert document.ocr_pages == 1
    (image,) = document.images
    assert (image.name, image.data, image.page_number) == ("image.png", data, None)
    assert network.attempts == []


def test_a_jpeg_is_read(ocr):
    picture = text_picture(["Copper kettle inventory"]).convert("RGB")

    document = extract(ocr, encoded(picture, "JPEG", quality=85), "image/jpeg")

    assert {"copper", "kettle", "inventory"} <= words(document.markdown)
    assert document.ocr_pages == 1


def test_a_two_page_tiff_is_read_page_by_page_and_kept_as_png_pages(ocr, network):
    first, second = text_picture(["Meadow orchard"]), text_picture(["Granite quarry"])
    data = encoded(first, "TIFF", save_all=True, append_images=[second], compression="tiff_lzw")

    document = extract(ocr, data, "image/tiff")

    assert [page.number for page in document.pages] == [1, 2]
    assert {"meadow", "orchard"} <= words(document.pages[0].text)
    assert {"granite", "quarry"} <= words(document.pages[1].text)
    assert document.markdown == (
        f"<!-- page 1 -->\n\n{document.pages[0].text}\n\n"
        f"<!-- page 2 -->\n\n{document.pages[1].text}"
    )
    assert document.ocr_pages == 2
    assert [(i.name, i.content_type, i.page_number) for i in document.images] == [
        ("page-0001.png", "image/png", 1),
        ("page-0002.png", "image/png", 2),
    ]
    assert Image.open(io.BytesIO(document.images[1].data)).size == second.size
    assert network.attempts == []


def test_only_the_pdf_page_without_a_text_layer_is_read_by_ocr_in_its_place(ocr):
    data = scanned_pdf("The typed page mentions budgets.", ["Scanned walrus invoice"])

    document = extract(ocr, data, "application/pdf")

    typed, scanned = document.pages
    assert (typed.number, typed.text) == (1, "The typed page mentions budgets.")
    assert scanned.number == 2 and {"scanned", "walrus", "invoice"} <= words(scanned.text)
    assert document.ocr_pages == 1
    assert document.markdown == (
        f"<!-- page 1 -->\n\n{typed.text}\n\n<!-- page 2 -->\n\n{scanned.text}"
    )
    assert [image.page_number for image in document.images] == [1, 2]


def test_an_image_without_text_completes_with_an_empty_page(ocr):
    document = extract(ocr, encoded(Image.new("RGB", (500, 400), "white"), "PNG"), "image/png")

    assert document.markdown == ""
    assert [(page.number, page.text) for page in document.pages] == [(1, "")]
    assert document.ocr_pages == 1 and len(document.images) == 1


@pytest.mark.parametrize("content_type", ["image/png", "image/jpeg"])
def test_a_truncated_image_completes_without_text_and_is_kept(ocr, content_type):
    picture = text_picture(["Truncated halfway"]).convert("RGB")
    whole = encoded(picture, "PNG" if content_type == "image/png" else "JPEG")
    data = whole[: len(whole) // 2]

    document = extract(ocr, data, content_type)

    assert document.markdown == "" and document.ocr_pages == 0
    assert [(page.number, page.text) for page in document.pages] == [(1, "")]
    assert document.images[0].data == data


@pytest.mark.filterwarnings("ignore:Corrupt EXIF data")
def test_a_damaged_tiff_is_refused_with_a_clear_message(ocr):
    with pytest.raises(ExtractionFailed) as failed:
        extract(ocr, b"II*\x00" + b"\xff" * 64, "image/tiff")

    assert failed.value.message == "The file is not a readable TIFF image."


def test_a_tiff_past_the_page_or_pixel_limits_is_refused_before_any_page_is_read(ocr):
    pages = [Image.new("L", (60, 50), 255) for _ in range(3)]
    data = encoded(pages[0], "TIFF", save_all=True, append_images=pages[1:])

    with pytest.raises(ExtractionFailed) as failed:
        extract(ocr, data, "image/tiff", ExtractionLimits(max_pages=2))
    assert failed.value.message == "The TIFF has more than 2 pages, the limit for one file."

    with pytest.raises(ExtractionFailed) as failed:
        extract(ocr, data, "image/tiff", ExtractionLimits(max_image_pixels=2000))
    assert failed.value.message == (
        "The image is too large: 60 x 50 pixels is more than the limit of 2,000 pixels."
    )


class Reader:
    """Reads "text of page N" on the Nth picture it is given, without any model."""

    def __init__(self) -> None:
        self.count = 0

    def read(self, picture: Image.Image, *, threads: int) -> str:
        self.count += 1
        return f"text of page {self.count}"


def test_pages_past_max_ocr_pages_keep_no_text_and_the_file_completes():
    pages = [Image.new("L", (60, 50), 255) for _ in range(3)]
    data = encoded(pages[0], "TIFF", save_all=True, append_images=pages[1:])

    document = extract(
        FileTextExtractor(Reader()), data, "image/tiff", ExtractionLimits(max_ocr_pages=2)
    )

    assert [page.text for page in document.pages] == ["text of page 1", "text of page 2", ""]
    assert document.ocr_pages == 2 and len(document.images) == 3


@pytest.mark.filterwarnings("ignore:Corrupt EXIF data")
def test_a_tiff_whose_second_page_is_damaged_completes_with_its_first():
    pages = [Image.new("L", (60, 50), 255), Image.new("L", (70, 40), 0)]
    data = encoded(pages[0], "TIFF", save_all=True, append_images=pages[1:])
    first = struct.unpack("<I", data[4:8])[0]
    entries = struct.unpack("<H", data[first : first + 2])[0]
    (second,) = struct.unpack("<I", data[first + 2 + entries * 12 : first + 6 + entries * 12])

    document = extract(FileTextExtractor(Reader()), data[: second + 4], "image/tiff")

    assert [(page.number, page.text) for page in document.pages] == [(1, "text of page 1")]
    assert document.ocr_pages == 1 and [i.name for i in document.images] == ["page-0001.png"]


def test_max_ocr_pages_zero_turns_ocr_off():
    reader = Reader()
    data = scanned_pdf("Typed.", ["Scanned"])
    png = text_png(["Unread"])
    off = ExtractionLimits(max_ocr_pages=0)

    pdf = extract(FileTextExtractor(reader), data, "application/pdf", off)
    image = extract(FileTextExtractor(reader), png, "image/png", off)

    assert reader.count == 0
    assert [page.text for page in pdf.pages] == ["Typed.", ""] and pdf.ocr_pages == 0
    assert image.pages == [] and image.markdown == "" and image.ocr_pages == 0


class AbortingReader:
    """Kills its process, as a crash in native OCR code would."""

    def read(self, picture: Image.Image, *, threads: int) -> str:
        os.abort()


def aborting_extractor() -> FileTextExtractor:
    """The sandbox child's extractor for the crash test: OCR that aborts."""
    return FileTextExtractor(AbortingReader())


def test_a_crash_in_ocr_costs_the_sandbox_child_and_that_file_only():
    sandbox = SandboxedTextExtractor(
        memory_limit=1024 * 2**20,
        timeout=60,
        target="tests.integration.test_ocr_extraction:aborting_extractor",
    )
    try:
        with pytest.raises(ExtractorCrashed, match="SIGABRT"):
            sandbox.extract(
                text_png(["Crash"]), content_type="image/png", file_name="a.png", limits=LIMITS
            )
        after = sandbox.extract(
            b"# Still here\n", content_type="text/markdown", file_name="b.md", limits=LIMITS
        )
    finally:
        sandbox.close()

    assert "Still here" in after.markdown
