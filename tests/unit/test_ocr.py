"""OCR's parts that need no model: lines from the boxes found, one file's bounds (pages, time,
a picture the models refuse), pictures made ready to read, the shipped models RapidOCR is
pointed at, and the page count `ProcessFile` records."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from adapters.extraction.ocr import (
    MAX_SIDE,
    MODEL_FILES,
    OcrRun,
    engine_params,
    join_lines,
    ocr_picture,
    rapidocr_installed,
    shipped_models,
)
from domain.extraction import ExtractedDocument, ExtractedPage, ExtractionLimits
from domain.files import ProcessingStatus
from tests.fakes import FakeChunks
from tests.unit.test_processing_use_cases import run, setup


def box(left: float, top: float, right: float, bottom: float) -> list[list[float]]:
    return [[left, top], [right, top], [right, bottom], [left, bottom]]


class Reader:
    """Reads "page N" for the Nth picture; raises what it is given instead."""

    def __init__(self, failure: Exception | None = None) -> None:
        self.failure = failure
        self.pictures: list[Image.Image] = []
        self.threads: list[int] = []

    def read(self, picture: Image.Image, *, threads: int) -> str:
        if self.failure is not None:
            raise self.failure
        self.pictures.append(picture)
        self.threads.append(threads)
        return f"page {len(self.pictures)}"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_boxes_at_one_height_make_a_line_read_left_to_right_and_lines_go_down():
    boxes = [
        box(300, 12, 420, 40),  # the first line's second word, found first
        box(10, 10, 200, 42),
        box(10, 60, 150, 90),
        box(400, 200, 500, 230),
        box(10, 205, 120, 228),
    ]
    texts = ["world", "hello", "second line", "right", " left "]

    assert join_lines(boxes, texts) == "hello world\nsecond line\nleft right"


def test_boxes_without_text_are_left_out_and_none_make_an_empty_page():
    assert join_lines([box(0, 0, 10, 10), box(0, 20, 10, 30)], ["  ", "kept"]) == "kept"
    assert join_lines([], []) == ""


def test_a_run_reads_up_to_max_ocr_pages_then_no_more():
    reader = Reader()
    ocr = OcrRun(reader, ExtractionLimits(max_ocr_pages=2, ocr_threads=3))
    picture = Image.new("L", (20, 10), 255)

    assert [ocr.read(picture) for _ in range(3)] == ["page 1", "page 2", None]
    assert ocr.pages == 2 and not ocr.wanted
    assert reader.threads == [3, 3]


def test_a_run_stops_reading_once_its_time_is_spent():
    clock = Clock()
    ocr = OcrRun(Reader(), ExtractionLimits(max_ocr_seconds=30), clock=clock)
    picture = Image.new("L", (20, 10), 255)

    assert ocr.read(picture) == "page 1"
    clock.now += 31
    assert not ocr.wanted
    assert ocr.read(picture) is None
    assert ocr.pages == 1


def test_a_picture_the_models_fail_on_is_a_page_without_text_and_is_not_counted(capsys):
    ocr = OcrRun(Reader(RuntimeError("onnxruntime refused the input")), ExtractionLimits())

    assert ocr.read(Image.new("L", (20, 10), 255)) is None
    assert ocr.pages == 0 and ocr.wanted
    assert "OCR could not read a page: RuntimeError" in capsys.readouterr().err


def test_a_run_without_a_reader_reads_nothing():
    ocr = OcrRun(None, ExtractionLimits())

    assert not ocr.wanted
    assert ocr.read(Image.new("L", (20, 10), 255)) is None


@pytest.mark.parametrize(
    ("mode", "colour", "expected_mode", "expected_pixel"),
    [
        ("RGBA", (0, 0, 0, 0), "RGB", (255, 255, 255)),  # transparent: white paper
        ("LA", (0, 255), "RGB", (0, 0, 0)),
        ("1", 0, "L", 0),
        ("CMYK", (0, 0, 0, 255), "RGB", (0, 0, 0)),
        ("L", 17, "L", 17),
        ("RGB", (1, 2, 3), "RGB", (1, 2, 3)),
    ],
)
def test_a_picture_is_read_as_grey_or_rgb_with_transparency_on_white(
    mode, colour, expected_mode, expected_pixel
):
    picture = ocr_picture(Image.new(mode, (8, 8), colour))

    assert picture.mode == expected_mode
    assert picture.getpixel((0, 0)) == expected_pixel


def test_a_sixteen_bit_scan_is_stretched_to_eight_bits_instead_of_clipped_to_white():
    wide = Image.new("I;16", (4, 1))
    for x, value in enumerate((1000, 20000, 40000, 60000)):
        wide.putpixel((x, 0), value)

    picture = ocr_picture(wide)

    pixels = [picture.getpixel((x, 0)) for x in range(4)]
    assert picture.mode == "L"
    assert pixels[0] == 0 and pixels[3] == 255 and 0 < pixels[1] < pixels[2] < 255


def test_a_large_picture_is_scaled_down_to_the_longest_side_ocr_reads_and_left_alone():
    original = Image.new("L", (MAX_SIDE * 2, MAX_SIDE), 255)

    picture = ocr_picture(original)

    assert picture.size == (MAX_SIDE, MAX_SIDE // 2)
    assert original.size == (MAX_SIDE * 2, MAX_SIDE)


@pytest.mark.skipif(not rapidocr_installed(), reason="rapidocr is not installed")
def test_rapidocr_is_given_the_model_files_its_wheel_ships_and_bounded_threads():
    models = shipped_models()
    params = engine_params(threads=1)

    assert {stage: path.name for stage, path in models.items()} == MODEL_FILES
    for stage, path in models.items():
        assert path.is_file() and path.stat().st_size > 100_000
        # A path for every stage: RapidOCR downloads a model only when it has none.
        assert Path(params[f"{stage}.model_path"]) == path
    assert params["EngineConfig.onnxruntime.intra_op_num_threads"] == 1
    assert params["EngineConfig.onnxruntime.inter_op_num_threads"] == 1


class OcrExtractor:
    """A `TextExtractor` whose document had two pages read by OCR."""

    def extract(self, data, *, content_type, file_name, limits) -> ExtractedDocument:
        pages = [ExtractedPage(number=1, text="scanned one"), ExtractedPage(number=2, text="")]
        return ExtractedDocument(
            markdown="<!-- page 1 -->\n\nscanned one", pages=pages, ocr_pages=2
        )


async def test_processing_records_how_many_pages_were_read_by_ocr(world, caller):
    use_case, record = await setup(world, caller, FakeChunks(), extractor=OcrExtractor())
    assert world.files.rows[record.id].ocr_pages == 0

    assert await run(use_case, record) is ProcessingStatus.COMPLETED
    assert world.files.rows[record.id].ocr_pages == 2
