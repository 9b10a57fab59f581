"""Extraction refuses files that would grow past its limits before the parser that would grow
them runs: hostile PDFs, DOCX, HTML, JSON and CSV built byte by byte, and ordinary ones that
still read as before."""

from __future__ import annotations

import base64
import binascii
import ctypes.util
import json
import threading
import time
import zlib

import psutil
import pytest
from fpdf import FPDF
from fpdf.enums import EncryptionMethod

import adapters.extraction.pdf as pdf_module
import adapters.extraction.word as word_module
from adapters.extraction import FileTextExtractor
from domain.extraction import ExtractedDocument, ExtractionFailed, ExtractionLimits
from tests.integration import extraction_samples as samples

MIB = 1024 * 1024
PDF = "application/pdf"
# Drawing a one-point square: one path object each in PDFium, the costliest content per byte.
SQUARE = b"0 0 1 1 re f\n"
TEXT = b"BT /F1 24 Tf 72 700 Td (Still readable) Tj ET"
FORM = b"/Type /XObject /Subtype /Form /BBox [0 0 10 10] /Filter /FlateDecode"
SMALL = ExtractionLimits(
    max_stream_bytes=MIB, max_page_content_bytes=MIB, max_decompressed_bytes=4 * MIB
)


def extract(
    data: bytes, content_type: str = PDF, limits: ExtractionLimits | None = None
) -> ExtractedDocument:
    return FileTextExtractor().extract(
        data, content_type=content_type, file_name="upload", limits=limits or ExtractionLimits()
    )


def failure(data: bytes, content_type: str = PDF, limits: ExtractionLimits | None = None) -> str:
    with pytest.raises(ExtractionFailed) as raised:
        extract(data, content_type, limits)
    return raised.value.message


def squares(megabytes: int) -> bytes:
    """Flate data inflating to `megabytes` MiB of squares, a few kilobytes per 100 MiB."""
    return samples.deflate_repeated(SQUARE * (MIB // len(SQUARE)), megabytes)


def page_with(contents: bytes, **objects: bytes) -> bytes:
    """A one-page PDF whose /Contents is `contents`; objects are given as o5=..., o6=..."""
    numbered = {int(key[1:]): value for key, value in objects.items()}
    return samples.one_page_pdf(contents, extra=numbered)


@pytest.fixture
def pages_never_load(monkeypatch):
    """Fail the test if PDFium is asked to load a page."""

    def refuse(*_arguments):
        raise AssertionError("a page was loaded")

    monkeypatch.setattr(pdf_module.pdfium.PdfDocument, "get_page", refuse)


@pytest.fixture
def pdfium_never_opens(monkeypatch):
    """Fail the test if PDFium is asked to open the document."""

    def refuse(*_arguments, **_keywords):
        raise AssertionError("the document was opened")

    monkeypatch.setattr(pdf_module.pdfium, "PdfDocument", refuse)


# --- PDF pages -------------------------------------------------------------------------------


def test_a_small_pdf_whose_content_inflates_to_300_mb_fails_before_its_page_loads(
    pages_never_load,
):
    bomb = page_with(b"5 0 R", o5=samples.stream_object(squares(300)))
    assert len(bomb) < 1024 * 1024

    started = time.monotonic()
    message = failure(bomb)

    assert message == (
        "Page 1 of this PDF is too large to process: its content inflates past 32 MB."
    )
    assert time.monotonic() - started < 5


def test_page_content_is_counted_as_pdfium_parses_it_not_as_the_file_stores_it(
    pages_never_load,
):
    almost_full = samples.stream_object(squares(1))  # just under the 1 MiB limit
    cases = {
        "one stream listed twice": page_with(b"[5 0 R 5 0 R]", o5=almost_full),
        "the list itself indirect": page_with(b"6 0 R", o5=almost_full, o6=b"[5 0 R 5 0 R]"),
        "a stream calling itself an image": page_with(
            b"5 0 R", o5=samples.stream_object(squares(2), b"/Subtype /Image /Filter /FlateDecode")
        ),
    }
    for name, data in cases.items():
        assert failure(data, limits=SMALL).startswith("Page 1 of this PDF is too large"), name


@pytest.mark.parametrize(
    "drawing",
    [
        b"/Fm0 Do\n" * 3,
        b"/F#6d0 Do " * 3,  # the same name, spelled with an escape
        b"/Fm0 %a comment\nDo\n" * 3,  # the operand hidden from a simple pattern
    ],
)
def test_a_form_counts_each_time_the_page_draws_it(drawing):
    form = samples.stream_object(zlib.compress(SQUARE * 40_000), FORM)  # about 0.5 MiB
    data = samples.one_page_pdf(
        b"6 0 R",
        resources=b"<< /XObject << /Fm0 5 0 R >> >>",
        extra={5: form, 6: samples.stream_object(zlib.compress(drawing))},
    )

    assert failure(data, limits=SMALL).startswith("Page 1 of this PDF is too large")
    assert extract(data).pages[0].text == ""  # within the default limits it is read


def test_forms_drawing_forms_multiply(pages_never_load):
    inner = samples.stream_object(zlib.compress(SQUARE * 100), FORM)  # 1.3 KB
    outer = samples.stream_object(
        zlib.compress(b"/B Do\n" * 1000), FORM + b" /Resources << /XObject << /B 7 0 R >> >>"
    )
    data = samples.one_page_pdf(
        b"6 0 R",
        resources=b"<< /XObject << /A 5 0 R >> >>",
        extra={5: outer, 6: samples.stream_object(zlib.compress(b"/A Do\n" * 1000)), 7: inner},
    )

    assert failure(data).startswith("Page 1 of this PDF is too large")  # 1.3 GB drawn


def test_annotation_appearances_count_towards_their_page(pages_never_load):
    data = samples.one_page_pdf(
        b"6 0 R",
        page_entries=b"/Annots [7 0 R]",
        extra={
            5: samples.stream_object(squares(2), FORM),
            6: samples.stream_object(zlib.compress(TEXT)),
            7: b"<< /Type /Annot /Subtype /Square /Rect [0 0 9 9] /AP << /N 5 0 R >> >>",
        },
    )

    assert failure(data, limits=SMALL).startswith("Page 1 of this PDF is too large")


@pytest.mark.parametrize(
    ("content", "limit"),
    [
        (b"BT /F1 1 Tf (" + b"a" * 3000 + b") Tj ET", 1000),
        (b"BT /F1 1 Tf [(" + b"ab) 20 (" * 1000 + b")] TJ ET", 1000),
        (b"BT /F1 1 Tf <" + b"41" * 3000 + b"> Tj ET", 1000),
        (b"BT /F1 1 Tf (a\\) (" + b"b" * 3000 + b") Tj ET", 1000),  # an escaped parenthesis
    ],
)
def test_a_page_that_shows_too_much_text_fails_before_its_text_layer_is_built(
    pages_never_load, content, limit
):
    data = page_with(b"5 0 R", o5=samples.stream_object(zlib.compress(content)))

    message = failure(data, limits=ExtractionLimits(max_page_text_chars=limit))

    assert message == (
        "Page 1 of this PDF holds too much text to process: more than 1,000 characters."
    )


def test_a_string_running_on_into_the_next_content_stream_is_counted(pages_never_load):
    data = page_with(
        b"[5 0 R 6 0 R]",
        o5=samples.stream_object(zlib.compress(b"BT /F1 1 Tf (")),
        o6=samples.stream_object(zlib.compress(b"a" * 3000 + b") Tj ET")),
    )

    assert "too much text" in failure(data, limits=ExtractionLimits(max_page_text_chars=1000))


def test_a_font_that_inflates_past_the_stream_limit_is_refused(pages_never_load):
    data = samples.one_page_pdf(
        b"6 0 R",
        resources=b"<< /Font << /F1 7 0 R >> >>",
        extra={
            5: samples.stream_object(samples.deflate_repeated(bytes(MIB), 2)),
            6: samples.stream_object(zlib.compress(TEXT)),
            7: b"<< /Type /Font /Subtype /TrueType /BaseFont /X /FontDescriptor 8 0 R >>",
            8: b"<< /Type /FontDescriptor /FontName /X /Flags 32 /FontFile2 5 0 R >>",
        },
    )

    assert failure(data, limits=SMALL) == (
        "This PDF is too large to process: part of it inflates past 1 MB."
    )


def test_image_pixels_are_left_to_pdfium_which_decodes_only_what_the_size_needs():
    image = b"/Type /XObject /Subtype /Image /Width 8 /Height 8 /ColorSpace /DeviceGray"
    data = samples.one_page_pdf(
        b"6 0 R",
        resources=b"<< /Font << /F1 2 0 R >> /XObject << /Im 5 0 R >> >>",
        extra={
            5: samples.stream_object(
                samples.deflate_repeated(bytes(MIB), 8),
                image + b" /BitsPerComponent 8 /Filter /FlateDecode",
            ),
            6: samples.stream_object(zlib.compress(b"q 8 0 0 8 0 0 cm /Im Do Q " + TEXT)),
        },
    )

    assert extract(data, limits=SMALL).pages[0].text == "Still readable"


def test_the_pages_together_are_held_to_the_document_limit(pages_never_load):
    content = samples.stream_object(zlib.compress(SQUARE * 60_000))  # 0.75 MiB per page
    objects = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [3 0 R 4 0 R 5 0 R 6 0 R 7 0 R 8 0 R] /Count 6 >>",
        9: content,
    }
    for number in range(3, 9):
        objects[number] = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 9 9] /Contents 9 0 R >>"

    assert failure(samples.raw_pdf(objects), limits=SMALL) == (
        "This PDF is too large once decompressed: more than the limit of 4 MB."
    )


@pytest.mark.parametrize(
    ("filters", "encode"),
    [
        (b"/ASCII85Decode /FlateDecode", lambda data: base64.a85encode(zlib.compress(data))),
        (b"/AHx /Fl", lambda data: binascii.hexlify(zlib.compress(data)) + b">"),
        (b"/LZWDecode", samples.lzw),
        (b"/RunLengthDecode", samples.run_length),
    ],
)
def test_every_filter_pdfium_inflates_with_is_measured(filters, encode):
    small = page_with(b"5 0 R", o5=samples.stream_object(encode(TEXT), b"/Filter [%s]" % filters))
    large = page_with(
        b"5 0 R",
        o5=samples.stream_object(encode(SQUARE * 85_000), b"/Filter [%s]" % filters),
    )

    assert extract(small).pages[0].text == "Still readable"
    assert failure(large, limits=SMALL).startswith("Page 1 of this PDF is too large")


def test_pdfs_with_object_streams_are_read_and_measured():
    readable = samples.one_page_pdf(
        b"5 0 R",
        extra={5: samples.stream_object(zlib.compress(TEXT))},
        object_stream={1, 2, 3, 4},
    )
    bomb = samples.one_page_pdf(
        b"5 0 R", extra={5: samples.stream_object(squares(2))}, object_stream={1, 2, 3, 4}
    )

    assert extract(readable).pages[0].text == "Still readable"
    assert failure(bomb, limits=SMALL).startswith("Page 1 of this PDF is too large")


@pytest.mark.parametrize(
    "method", [EncryptionMethod.RC4, EncryptionMethod.AES_128, EncryptionMethod.AES_256]
)
def test_encrypted_pdfs_are_measured_decrypted(method):
    document = FPDF()
    document.set_font("helvetica", size=4)
    document.add_page()
    document.multi_cell(0, 2, "Secret text " * 400)
    document.set_encryption(owner_password="owner", encryption_method=method)
    data = bytes(document.output())

    assert "too much text" in failure(data, limits=ExtractionLimits(max_page_text_chars=2000))
    assert extract(data).pages[0].text.startswith("Secret text Secret text")


# --- What PDFium inflates as it opens a file --------------------------------------------------


def metadata_pdf(catalog: bytes, metadata: bytes, *, object_stream: set[int] | None = None):
    return samples.one_page_pdf(
        b"5 0 R",
        extra={
            1: b"<< /Type /Catalog /Pages 4 0 R %s >>" % catalog,
            5: samples.stream_object(zlib.compress(TEXT)),
            6: samples.stream_object(metadata, b"/Type /Metadata /Subtype /XML /Filter /Fl"),
        },
        object_stream=object_stream or set(),
    )


@pytest.mark.parametrize(
    ("catalog", "object_stream"),
    [
        (b"/Metadata 6 0 R", None),
        (b"/Met#61data 6 0 R", None),  # the same key, spelled with an escape
        (b"/Metadata % a comment\n 6 0 R", None),
        (b"/Metadata 6 0 R", {1, 2, 3, 4}),  # the catalog inside a compressed object stream
    ],
)
def test_catalog_metadata_is_measured_before_pdfium_opens_the_file(
    pdfium_never_opens, catalog, object_stream
):
    # PDFium inflates and parses the catalog's /Metadata as XML while opening the document.
    data = metadata_pdf(
        catalog, samples.deflate_repeated(bytes(MIB), 2), object_stream=object_stream
    )

    assert failure(data, limits=SMALL) == (
        "This PDF is too large to process: part of it inflates past 1 MB."
    )


def test_an_object_stream_is_measured_before_pdfium_opens_the_file(pdfium_never_opens):
    objects = {
        1: b"<< /Type /Catalog /Pages 4 0 R >>",
        3: b"<< /Type /Page /Parent 4 0 R /MediaBox [0 0 9 9] >>",
        4: b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    }
    data = samples.raw_pdf(objects, object_stream={1, 3, 4})
    packed = data.index(b"/Type /ObjStm")
    start = data.index(b"stream\n", packed) + len(b"stream\n")
    end = data.index(b"\nendstream", start)
    # The same stream, padded with two mebibytes of spaces PDFium would inflate along with it.
    padded = zlib.decompress(data[start:end]) + b" " * (2 * MIB)
    bomb = data[:start] + zlib.compress(padded, 9) + data[end:]
    bomb = bomb.replace(b"/Length %d" % (end - start), b"/Length %d" % len(zlib.compress(padded)))

    assert failure(bomb, limits=SMALL) == (
        "This PDF is too large to process: part of it inflates past 1 MB."
    )


def test_small_metadata_and_metadata_pdfium_never_reads_are_fine():
    bomb = samples.deflate_repeated(bytes(MIB), 2)

    assert extract(metadata_pdf(b"/Metadata 6 0 R", zlib.compress(b"<x/>"))).markdown
    assert extract(metadata_pdf(b"", bomb), limits=SMALL).markdown  # not the catalog's


# --- Memory is handed back --------------------------------------------------------------------


@pytest.mark.skipif(ctypes.util.find_library("c") is None, reason="needs the C library")
def test_memory_pdfium_used_for_a_page_is_handed_back_once_the_file_is_read():
    data = page_with(b"5 0 R", o5=samples.stream_object(squares(12)))  # ~300 MB in PDFium
    extract(page_with(b"5 0 R", o5=samples.stream_object(zlib.compress(TEXT))))  # warm up
    process = psutil.Process()
    before = process.memory_info().rss

    worker = threading.Thread(target=extract, args=(data,))
    worker.start()
    worker.join()

    assert process.memory_info().rss - before < 100 * MIB


# --- DOCX ------------------------------------------------------------------------------------


def test_a_docx_of_50_mb_of_tiny_paragraphs_fails_before_mammoth_runs(monkeypatch):
    def refuse(*_arguments, **_keywords):
        raise AssertionError("mammoth ran")

    monkeypatch.setattr(word_module.mammoth, "convert_to_html", refuse)
    bomb = samples.docx_with_paragraphs(b"<w:p/>", 8_800_000)  # 50 MiB of XML
    assert len(bomb) < 200 * 1024

    started = time.monotonic()
    message = failure(bomb, samples.DOCX_TYPE)

    assert message == (
        "The document is too large to process: it has more than 500,000 paragraphs, runs and "
        "other elements."
    )
    assert time.monotonic() - started < 5


def test_a_docx_within_the_element_limit_still_reads():
    paragraph = b"<w:p><w:r><w:t>Line</w:t></w:r></w:p>"
    data = samples.docx_with_paragraphs(paragraph, 300)

    assert extract(data, samples.DOCX_TYPE).markdown.count("Line") == 300
    assert "too large" in failure(
        data, samples.DOCX_TYPE, ExtractionLimits(max_markup_elements=500)
    )


def test_a_docx_part_over_the_stream_limit_is_refused_by_its_declared_size():
    data = samples.docx_with_paragraphs(b"<w:p/>", 200_000)  # 1.2 MB of XML

    message = failure(data, samples.DOCX_TYPE, ExtractionLimits(max_stream_bytes=MIB))

    assert message == (
        "The document is too large once decompressed: one of its parts grows past 1 MB."
    )


def test_a_docx_part_lying_about_its_size_is_refused():
    data = bytearray(samples.docx_with_paragraphs(b"<w:p/>", 200_000))
    directory = data.rindex(b"PK\x01\x02", 0, data.rindex(b"word/document.xml") + 1)
    # The central directory's uncompressed size (offset 24): claim 1 KB instead of 1.2 MB.
    data[directory + 24 : directory + 28] = (1024).to_bytes(4, "little")

    # zipfile yields no more than the declared size, then fails the entry's checksum.
    assert failure(bytes(data), samples.DOCX_TYPE) == "The file is not a valid DOCX document."


def test_a_docx_declaring_entities_is_refused():
    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE w [<!ENTITY a "aaaaaaaaaa">'
        b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
    )
    data = samples.docx_with_paragraphs(b"<w:p><w:r><w:t>&b;</w:t></w:r></w:p>", 10)
    data = samples.zip_archive(
        {
            name: (laughs + content.split(b"?>", 1)[1] if name == "word/document.xml" else content)
            for name, content in _entries(data).items()
        }
    )

    assert failure(data, samples.DOCX_TYPE) == "The file is not a valid DOCX document."


def test_a_zip_of_too_many_files_is_refused_before_its_directory_is_read():
    entries = {f"word/part{index}.xml": b"<x/>" for index in range(60)}
    data = samples.zip_archive(_entries(samples.docx_document()) | entries)

    message = failure(data, samples.DOCX_TYPE, ExtractionLimits(max_archive_entries=50))

    assert message == "The document is too large to process: its zip holds more than 50 files."
    # Untyped, it is not even looked into to tell whether it is a DOCX.
    assert failure(data, "", ExtractionLimits(max_archive_entries=50)).startswith("Unsupported")


def _entries(data: bytes) -> dict[str, bytes]:
    with samples.zipfile.ZipFile(samples.io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


# --- HTML, JSON, CSV -------------------------------------------------------------------------


def test_an_html_page_with_too_many_tags_is_refused_before_it_is_parsed():
    page = b"<html><body>" + b"<p>a</p>" * 600 + b"</body></html>"

    assert extract(page, "text/html").markdown.startswith("a")
    assert failure(page, "text/html", ExtractionLimits(max_markup_elements=1000)) == (
        "The HTML page is too large to process: it has more than 1,000 tags."
    )


def test_json_whose_indentation_would_print_gigabytes_fails_as_it_prints():
    # 200 KB nested 900 deep: each of its 100,000 zeros would be printed behind 1,800 spaces.
    data = b"[" * 900 + b"0," * 100_000 + b"0" + b"]" * 900

    started = time.monotonic()
    message = failure(data, "application/json")

    assert message == (
        "The extracted text is too large: more than the limit of 20,000,000 characters."
    )
    assert time.monotonic() - started < 5


def test_json_with_more_values_than_the_text_limit_is_refused_before_parsing(monkeypatch):
    monkeypatch.setattr(json, "loads", lambda *_: pytest.fail("parsed"))

    assert "too large" in failure(
        b"[" + b"{}," * 2000 + b"{}]", "application/json", ExtractionLimits(max_text_chars=1000)
    )


def test_csv_with_more_cells_than_the_text_limit_is_refused_before_the_table_is_built():
    assert "too large" in failure(
        b"a,b\n" * 1000, "text/csv", ExtractionLimits(max_text_chars=1000)
    )
    assert extract(b"a,b\n1,2\n", "text/csv").markdown == "| a | b |\n| --- | --- |\n| 1 | 2 |"
