"""The file text extractor on real files of every supported format and on all kinds of bad input."""

from __future__ import annotations

import random
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from adapters.extraction import FileTextExtractor
from domain.extraction import ExtractedDocument, ExtractionFailed, ExtractionLimits
from tests.integration import extraction_samples as samples

LIMITS = ExtractionLimits()
A4_POINTS = (595.28, 841.89)
PAGE_MARKER = re.compile(r"^<!-- page (\d+) -->$", re.MULTILINE)


@pytest.fixture(scope="module")
def extractor() -> FileTextExtractor:
    return FileTextExtractor()


def extract(
    data: bytes,
    content_type: str,
    file_name: str = "upload",
    limits: ExtractionLimits = LIMITS,
) -> ExtractedDocument:
    return FileTextExtractor().extract(
        data, content_type=content_type, file_name=file_name, limits=limits
    )


def failure(
    data: bytes,
    content_type: str,
    file_name: str = "upload",
    limits: ExtractionLimits = LIMITS,
) -> str:
    with pytest.raises(ExtractionFailed) as raised:
        extract(data, content_type, file_name, limits)
    message = raised.value.message
    assert message and message == str(raised.value)
    return message


# --- PDF -------------------------------------------------------------------------------------


def test_pdf_gives_text_per_page_with_page_markers_and_a_png_of_every_page():
    document = extract(
        samples.pdf(["Alpha page text", "Bravo page text", "Charlie page text"]),
        "application/pdf",
        "report.pdf",
    )

    assert [(page.number, page.text) for page in document.pages] == [
        (1, "Alpha page text"),
        (2, "Bravo page text"),
        (3, "Charlie page text"),
    ]
    assert PAGE_MARKER.findall(document.markdown) == ["1", "2", "3"]
    sections = PAGE_MARKER.split(document.markdown)[1:]
    numbers, texts = sections[0::2], sections[1::2]
    assert [(int(number), text.strip()) for number, text in zip(numbers, texts, strict=True)] == [
        (page.number, page.text) for page in document.pages
    ]
    assert [(image.name, image.page_number) for image in document.images] == [
        ("page-0001.png", 1),
        ("page-0002.png", 2),
        ("page-0003.png", 3),
    ]
    expected_size = tuple(round(side * LIMITS.page_image_dpi / 72) for side in A4_POINTS)
    for image in document.images:
        assert image.content_type == "image/png"
        assert image.data.startswith(samples.PNG_SIGNATURE)
        width, height = samples.png_dimensions(image.data)
        assert abs(width - expected_size[0]) <= 1 and abs(height - expected_size[1]) <= 1


def test_pdf_page_images_keep_colour_and_store_colourless_pages_as_grey_scale():
    pages = extract(samples.text_and_colour_pdf((200, 30, 30)), "application/pdf", "a.pdf").images

    grey, red = (samples.png_pixels(page.data) for page in pages)
    assert (grey.mode, red.mode) == ("L", "RGB")
    assert grey.getextrema()[0] < 128  # the black text is there
    assert (200, 30, 30) in {colour for _, colour in red.getcolors(1 << 20) or []}


def test_pdf_page_images_follow_the_configured_dpi():
    document = extract(
        samples.pdf(["Low resolution"]),
        "application/pdf",
        "a.pdf",
        ExtractionLimits(page_image_dpi=36),
    )

    width, height = samples.png_dimensions(document.images[0].data)
    assert abs(width - A4_POINTS[0] / 2) <= 1 and abs(height - A4_POINTS[1] / 2) <= 1


def test_pdf_page_images_are_scaled_down_to_stay_within_the_pixel_limit():
    limits = ExtractionLimits(page_image_dpi=300, max_image_pixels=50_000)

    document = extract(samples.pdf(["Huge render"]), "application/pdf", "a.pdf", limits)

    width, height = samples.png_dimensions(document.images[0].data)
    assert width * height <= 50_000
    assert width * height > 40_000  # lowered to fit, not thrown away
    assert abs(width / height - A4_POINTS[0] / A4_POINTS[1]) < 0.02
    assert document.pages[0].text == "Huge render"


def test_a_pdf_without_any_text_is_not_a_failure_and_still_gets_page_images():
    document = extract(samples.pdf(["", ""]), "application/pdf", "scan.pdf")

    assert document.markdown == ""
    assert [(page.number, page.text) for page in document.pages] == [(1, ""), (2, "")]
    assert [image.page_number for image in document.images] == [1, 2]


def test_pages_without_text_get_no_marker_but_keep_their_numbers():
    document = extract(samples.pdf(["First", "", "Third"]), "application/pdf", "a.pdf")

    assert PAGE_MARKER.findall(document.markdown) == ["1", "3"]
    assert [page.number for page in document.pages] == [1, 2, 3]
    assert len(document.images) == 3


@pytest.mark.parametrize(
    ("content_type", "file_name"),
    [
        ("application/octet-stream", "report.pdf"),
        ("application/octet-stream", "no-extension"),
        ("", "report.PDF"),
        ("application/pdf; charset=binary", "x"),
    ],
)
def test_a_pdf_is_recognised_from_its_name_or_its_bytes(content_type, file_name):
    document = extract(samples.pdf(["Recognised"]), content_type, file_name)

    assert document.pages[0].text == "Recognised"


def test_a_pdf_with_only_an_owner_password_opens_without_one():
    document = extract(samples.pdf(["Restricted"], owner_password="owner"), "application/pdf")

    assert document.pages[0].text == "Restricted"


def test_a_password_protected_pdf_is_refused():
    data = samples.pdf(["Secret"], user_password="letmein", owner_password="owner")

    assert "password-protected" in failure(data, "application/pdf", "secret.pdf")


@pytest.mark.parametrize(
    "data",
    [
        b"%PDF-1.7\nthis is not really a pdf",
        b"just some text that claims to be a PDF",
        bytes(range(256)) * 8,
    ],
)
def test_a_corrupt_pdf_is_refused(data):
    assert failure(data, "application/pdf", "broken.pdf") == "The file is not a readable PDF."


def test_a_truncated_pdf_is_refused_or_repaired_but_never_crashes():
    data = samples.pdf(["Truncated document", "Second page"])

    for cut in (10, len(data) // 3, len(data) // 2, len(data) - 40):
        try:
            extract(data[:cut], "application/pdf", "cut.pdf")
        except ExtractionFailed as error:
            assert "PDF" in error.message


def test_a_pdf_over_the_page_limit_is_refused():
    data = samples.pdf(["one", "two", "three", "four"])

    message = failure(data, "application/pdf", "long.pdf", ExtractionLimits(max_pages=3))

    assert message == "The PDF has 4 pages, more than the limit of 3."


def test_a_pdf_at_the_page_limit_is_read():
    document = extract(
        samples.pdf(["one", "two", "three"]),
        "application/pdf",
        limits=ExtractionLimits(max_pages=3),
    )

    assert len(document.pages) == 3


def test_pdf_text_over_the_size_limit_is_refused():
    data = samples.pdf(["x" * 40, "y" * 40])

    message = failure(data, "application/pdf", "a.pdf", ExtractionLimits(max_text_chars=60))

    assert "too large" in message


def test_pdfs_are_read_correctly_from_several_threads_at_once():
    documents = {
        index: samples.pdf([f"Document {index} page {n}" for n in (1, 2)]) for index in range(8)
    }

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {
            index: pool.submit(extract, data, "application/pdf")
            for index, data in documents.items()
        }

    for index, future in futures.items():
        document = future.result()
        assert [page.text for page in document.pages] == [
            f"Document {index} page 1",
            f"Document {index} page 2",
        ]
        assert len(document.images) == 2


# --- DOCX ------------------------------------------------------------------------------------


def test_docx_becomes_markdown_with_headings_lists_and_tables():
    document = extract(samples.docx_document(), samples.DOCX_TYPE, "report.docx")

    assert document.markdown.splitlines() == [
        "# Quarterly Report",
        "",
        "# Summary",
        "",
        "Revenue grew by 12 percent.",
        "",
        "## Details",
        "",
        "- First point",
        "- Second point",
        "",
        "| Region | Sales |",
        "| --- | --- |",
        "| North | 42 |",
    ]
    assert [(page.number, page.text) for page in document.pages] == [(1, document.markdown)]
    assert document.images == []


@pytest.mark.parametrize(
    ("content_type", "file_name"),
    [("application/octet-stream", "report.docx"), ("application/zip", "upload"), ("", "")],
)
def test_a_docx_is_recognised_from_its_name_or_its_zip_contents(content_type, file_name):
    document = extract(samples.docx_document(), content_type, file_name)

    assert document.markdown.startswith("# Quarterly Report")


def test_a_docx_that_decompresses_beyond_the_limit_is_refused_before_inflating():
    bomb = samples.docx_bomb(inflated_bytes=4 * 1024 * 1024)
    assert len(bomb) < 100 * 1024

    message = failure(
        bomb, samples.DOCX_TYPE, "bomb.docx", ExtractionLimits(max_decompressed_bytes=1024 * 1024)
    )

    assert "too large once decompressed" in message


def test_a_zip_bomb_without_a_word_document_is_refused_too():
    bomb = samples.zip_archive({"a.bin": bytes(4 * 1024 * 1024), "b.bin": bytes(4 * 1024 * 1024)})

    message = failure(
        bomb, samples.DOCX_TYPE, "bomb.docx", ExtractionLimits(max_decompressed_bytes=1024 * 1024)
    )

    assert "too large once decompressed" in message


def test_a_docx_that_is_really_a_zip_of_something_else_is_refused():
    archive = samples.zip_archive({"notes.txt": b"hello", "photos/cat.jpg": b"\xff\xd8\xff"})

    assert failure(archive, samples.DOCX_TYPE, "notes.docx") == (
        "The file is not a valid DOCX document."
    )


def test_a_docx_whose_parts_use_a_compression_word_never_writes_is_refused():
    entries = {"[Content_Types].xml": b"<Types/>", "word/document.xml": b"<w:document/>"}
    archive = samples.zip_archive(entries, compression=samples.zipfile.ZIP_BZIP2)

    assert (
        failure(archive, samples.DOCX_TYPE, "odd.docx") == "The file is not a valid DOCX document."
    )


def test_a_docx_that_is_not_a_zip_at_all_is_refused():
    message = failure(b"this is plain text, not a zip", samples.DOCX_TYPE, "fake.docx")

    assert message == "The file is not a valid DOCX document."


def test_a_docx_with_a_broken_main_part_is_refused():
    archive = samples.zip_archive({"word/document.xml": b"<w:document><unclosed"})

    assert failure(archive, samples.DOCX_TYPE, "bad.docx") == (
        "The file is not a readable DOCX document."
    )


def test_a_password_protected_or_legacy_word_file_is_refused_with_a_hint():
    ole_file = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504)

    assert "password-protected or in the old Word" in failure(ole_file, samples.DOCX_TYPE, "a.docx")


def test_a_docx_without_text_is_refused():
    assert failure(samples.empty_docx(), samples.DOCX_TYPE, "blank.docx") == (
        "The document contains no text."
    )


# --- HTML ------------------------------------------------------------------------------------


def test_html_becomes_markdown_without_scripts_styles_or_inline_image_data():
    html = b"""<!doctype html>
    <html><head><title>Tab title</title><style>h1 { color: red }</style></head>
    <body><script>alert("x")</script>
    <h1>Main heading</h1><p>Some <b>bold</b> text and a <a href="https://example.com">link</a>.</p>
    <h2>Section</h2><ul><li>one</li><li>two</li></ul>
    <table><tr><th>Name</th><th>Age</th></tr><tr><td>Ann</td><td>31</td></tr></table>
    <img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==" alt="a chart">
    <noscript>Enable JavaScript</noscript></body></html>"""

    document = extract(html, "text/html; charset=utf-8", "page.html")

    assert document.markdown == (
        "# Main heading\n\n"
        "Some **bold** text and a [link](https://example.com).\n\n"
        "## Section\n\n"
        "- one\n- two\n\n"
        "| Name | Age |\n| --- | --- |\n| Ann | 31 |\n\n"
        "a chart"
    )
    assert [(page.number, page.text) for page in document.pages] == [(1, document.markdown)]


def test_html_in_a_legacy_charset_declared_in_a_meta_tag_is_decoded():
    html = (
        '<html><head><meta charset="windows-1252"></head><body><p>Café — déjà vu</p></body></html>'
    )

    document = extract(html.encode("cp1252"), "text/html", "page.htm")

    assert document.markdown == "Café — déjà vu"


def test_html_without_visible_text_is_refused():
    html = b"<html><head><title>t</title></head><body><script>var a = 1;</script></body></html>"

    assert failure(html, "text/html") == "The HTML page contains no text."


def test_html_nested_too_deeply_fails_cleanly():
    html = ("<div>" * 20_000 + "deep" + "</div>" * 20_000).encode()

    message = failure(html, "text/html", "deep.html")

    assert "HTML page" in message


# --- Markdown and plain text -----------------------------------------------------------------


def test_markdown_is_kept_as_it_is_with_unix_line_endings():
    markdown = "# Title\r\n\r\nSome *text* with `code`.\r\n\r\n- a\r\n- b\r\n"

    document = extract(markdown.encode(), "text/markdown", "notes.md")

    assert document.markdown == "# Title\n\nSome *text* with `code`.\n\n- a\n- b\n"
    assert [(page.number, page.text) for page in document.pages] == [(1, document.markdown)]


@pytest.mark.parametrize(
    ("data", "content_type"),
    [
        ("Grüße aus Köln — “quoted” €5".encode(), "text/plain"),
        ("\ufeffGrüße aus Köln — “quoted” €5".encode(), "text/plain"),
        ("\ufeffGrüße aus Köln — “quoted” €5".encode("utf-16-le"), "text/plain"),
        ("\ufeffGrüße aus Köln — “quoted” €5".encode("utf-16-be"), "text/plain"),
        ("Grüße aus Köln — “quoted” €5".encode("utf-16"), "application/octet-stream"),
        ("Grüße aus Köln — “quoted” €5".encode("cp1252"), "text/plain"),
        ("Grüße aus Köln — “quoted” €5".encode("cp1252"), "text/markdown"),
    ],
)
def test_text_in_any_common_encoding_comes_out_readable(data, content_type):
    document = extract(data, content_type, "notes.txt")

    assert document.markdown == "Grüße aus Köln — “quoted” €5"


@pytest.mark.parametrize(
    "text",
    [
        "Café crème, naïve señor, déjà vu à la française.",
        "Straße, Größe, Übermaß, schön und grün.",
        "Ærø, Ålesund, fjørd, smørrebrød.",
    ],
)
def test_latin_1_text_comes_out_readable(text):
    assert extract(text.encode("latin-1"), "text/plain", "a.txt").markdown == text


def test_a_declared_charset_is_used_when_the_bytes_are_not_utf_8():
    text = "Привет, мир! Это текст в кодировке Windows-1251."

    document = extract(text.encode("cp1251"), "text/plain; charset=windows-1251", "ru.txt")

    assert document.markdown == text


def test_cyrillic_without_a_declared_charset_is_detected():
    text = "Привет, мир! Это простой текст в старой кодировке, и он должен читаться."

    assert extract(text.encode("cp1251"), "text/plain", "ru.txt").markdown == text


def test_a_bogus_declared_charset_does_not_break_decoding():
    data = "naïve".encode("cp1252")

    assert extract(data, "text/plain; charset=rot13", "a.txt").markdown == "naïve"
    assert extract(data, "text/plain; charset=no-such-charset", "a.txt").markdown == "naïve"


@pytest.mark.parametrize("data", [b"   \n\t\r\n  ", "\ufeff  \n".encode(), "  ".encode("utf-16")])
def test_text_with_only_whitespace_is_refused_as_empty(data):
    assert "empty" in failure(data, "text/plain", "blank.txt")


def test_binary_bytes_sent_as_text_are_refused():
    data = bytes(range(256)) * 4

    assert failure(data, "text/plain", "a.txt") == "The file does not contain readable text."


def test_untyped_text_is_recognised_from_its_bytes():
    document = extract(b"just a note\nwith two lines", "application/octet-stream", "README")

    assert document.markdown == "just a note\nwith two lines"


def test_other_text_types_are_read_as_plain_text():
    assert extract(b"key: value\n", "application/x-yaml", "a.yaml").markdown == "key: value\n"
    assert extract(b"print('hi')\n", "text/x-python", "a.py").markdown == "print('hi')\n"


# --- CSV -------------------------------------------------------------------------------------


def test_csv_becomes_one_markdown_table_with_pipes_and_newlines_escaped():
    data = b'name,comment,score\r\nAnn,"likes a|b",3\r\nBob,"two\nlines",\r\n'

    document = extract(data, "text/csv", "scores.csv")

    assert document.markdown == (
        "| name | comment | score |\n"
        "| --- | --- | --- |\n"
        "| Ann | likes a\\|b | 3 |\n"
        "| Bob | two<br>lines |  |"
    )
    assert [(page.number, page.text) for page in document.pages] == [(1, document.markdown)]


@pytest.mark.parametrize(
    ("data", "content_type", "file_name"),
    [
        (b"city;people\nLyon;513000\nNice;342000\n", "text/csv", "a.csv"),
        (b"city\tpeople\nLyon\t513000\nNice\t342000\n", "text/tab-separated-values", "a.tsv"),
        (b"city|people\nLyon|513000\nNice|342000\n", "text/csv", "a.csv"),
        (b"city,people\nLyon,513000\nNice,342000\n", "text/plain", "a.csv"),
        (b"city,people\nLyon,513000\nNice,342000\n", "application/vnd.ms-excel", "a.csv"),
        (b"city,people\nLyon,513000\nNice,342000\n", "application/octet-stream", "a.csv"),
    ],
)
def test_csv_delimiters_and_loose_content_types_are_handled(data, content_type, file_name):
    document = extract(data, content_type, file_name)

    assert document.markdown == (
        "| city | people |\n| --- | --- |\n| Lyon | 513000 |\n| Nice | 342000 |"
    )


def test_csv_rows_of_different_lengths_are_padded():
    document = extract(b"a,b\n1\n1,2,3\n", "text/csv", "ragged.csv")

    assert document.markdown == "| a | b |  |\n| --- | --- | --- |\n| 1 |  |  |\n| 1 | 2 | 3 |"


def test_csv_in_a_legacy_encoding_is_decoded():
    data = "ville;prénom\nHyères;Zoé\n".encode("cp1252")

    assert extract(data, "text/csv", "a.csv").markdown == (
        "| ville | prénom |\n| --- | --- |\n| Hyères | Zoé |"
    )


def test_csv_without_rows_is_refused_as_empty():
    assert "empty" in failure(b"\n\n  \n", "text/csv", "a.csv")
    assert "empty" in failure(b",,\n,,\n", "text/csv", "a.csv")


def test_csv_with_a_field_beyond_the_parser_limit_is_refused():
    data = b'a,b\n"' + b"x" * 200_000 + b'",1\n'

    assert "CSV file cannot be parsed" in failure(data, "text/csv", "a.csv")


def test_csv_over_the_text_limit_is_refused_while_building_the_table():
    data = b"a,b\n" + b"1,2\n" * 10_000

    assert "too large" in failure(data, "text/csv", "a.csv", ExtractionLimits(max_text_chars=1000))


# --- JSON ------------------------------------------------------------------------------------


def test_json_is_pretty_printed_in_a_fenced_block():
    document = extract(b'{"name":"Zo\\u00e9","tags":["a","b"],"n":1}', "application/json", "a.json")

    assert document.markdown == (
        '```json\n{\n  "name": "Zoé",\n  "tags": [\n    "a",\n    "b"\n  ],\n  "n": 1\n}\n```'
    )
    assert [(page.number, page.text) for page in document.pages] == [(1, document.markdown)]


def test_json_containing_backticks_gets_a_longer_fence():
    document = extract(b'{"code": "```python"}', "application/ld+json", "a.jsonld")

    assert document.markdown.startswith("````json\n")
    assert document.markdown.endswith("\n````")


def test_json_with_a_lone_surrogate_escape_comes_out_storable():
    document = extract(b'{"broken": "\\ud800 tail"}', "application/json", "a.json")

    document.markdown.encode("utf-8")
    assert "tail" in document.markdown


def test_json_in_utf_16_is_read():
    data = '{"greeting": "grüß dich"}'.encode("utf-16")

    assert "grüß dich" in extract(data, "application/json", "a.json").markdown


@pytest.mark.parametrize(
    "data", [b'{"a": 1,}', b"{'single': 'quotes'}", b'{"a": [1, 2}', b"not json at all"]
)
def test_invalid_json_is_refused_with_the_position(data):
    message = failure(data, "application/json", "bad.json")

    assert message.startswith("The file is not valid JSON:")
    assert "line 1" in message


def test_json_nested_too_deeply_is_refused():
    data = b"[" * 200_000 + b"]" * 200_000

    assert "nested too deeply" in failure(data, "application/json", "deep.json")


def test_json_with_an_integer_beyond_the_digit_limit_is_refused():
    assert "not valid JSON" in failure(b"1" * 5000, "application/json", "big.json")


# --- Images ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("format_name", "options", "content_type", "name"),
    [
        ("PNG", {}, "image/png", "image.png"),
        ("JPEG", {}, "image/jpeg", "image.jpg"),
        ("JPEG", {"progressive": True}, "image/jpeg", "image.jpg"),
        ("GIF", {}, "image/gif", "image.gif"),
        ("WEBP", {}, "image/webp", "image.webp"),
        ("WEBP", {"lossless": True}, "image/webp", "image.webp"),
        ("WEBP", {"alpha": True}, "image/webp", "image.webp"),
    ],
)
def test_an_image_has_no_text_and_is_returned_as_its_own_image(
    format_name, options, content_type, name
):
    data = samples.image(format_name, **options)

    document = extract(data, content_type, "upload")

    assert document.markdown == ""
    assert document.pages == []
    assert len(document.images) == 1
    image = document.images[0]
    assert (image.name, image.content_type, image.page_number) == (name, content_type, None)
    assert image.data == data


def test_an_image_is_typed_by_its_bytes_when_the_label_is_wrong_or_missing():
    data = samples.image("JPEG")

    assert extract(data, "image/png", "photo.png").images[0].content_type == "image/jpeg"
    assert extract(data, "application/octet-stream", "photo").images[0].content_type == (
        "image/jpeg"
    )


@pytest.mark.parametrize("format_name", ["PNG", "JPEG", "GIF", "WEBP"])
def test_an_image_over_the_pixel_limit_is_refused(format_name):
    data = samples.image(format_name, size=(120, 100))

    message = failure(data, "image/png", "big", ExtractionLimits(max_image_pixels=10_000))

    assert message == (
        "The image is too large: 120 x 100 pixels is more than the limit of 10,000 pixels."
    )


def test_an_image_claiming_enormous_dimensions_is_refused_from_its_header():
    message = failure(samples.png_header(100_000, 100_000), "image/png", "bomb.png")

    assert "100000 x 100000 pixels" in message


@pytest.mark.parametrize(
    "data",
    [
        b"not an image at all",
        samples.PNG_SIGNATURE + b"\x00\x00\x00\x0dIHDX",
        b"\xff\xd8\xff\xe0\x00",
        b"GIF89a\x01",
        b"RIFF\x00\x00\x00\x00WEBPVP8 ",
        samples.png_header(0, 10),
    ],
)
def test_a_corrupt_image_is_refused(data):
    assert failure(data, "image/png", "x.png") == (
        "The file is not a readable PNG, JPEG, GIF or WebP image."
    )


# --- Everything else -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "file_name"),
    [
        ("application/pdf", "a.pdf"),
        (samples.DOCX_TYPE, "a.docx"),
        ("text/html", "a.html"),
        ("text/markdown", "a.md"),
        ("text/plain", "a.txt"),
        ("text/csv", "a.csv"),
        ("application/json", "a.json"),
        ("image/png", "a.png"),
        ("application/octet-stream", ""),
        ("application/x-unknown", "a.bin"),
    ],
)
def test_an_empty_file_is_refused_whatever_its_type(content_type, file_name):
    assert failure(b"", content_type, file_name) == "The file is empty."


@pytest.mark.parametrize(
    ("data", "content_type", "file_name", "named"),
    [
        (b"\x00\x01binary", "application/vnd.ms-excel", "book.xls", "application/vnd.ms-excel"),
        (b"BM\x00\x00", "image/bmp", "scan.bmp", "image/bmp"),
        (b"<svg/>", "image/svg+xml", "logo.svg", "image/svg+xml"),
        (b"\x00\x01\x02", "application/octet-stream", "blob.bin", ".bin"),
        (b"\x00\x01\x02", "application/octet-stream", "", "application/octet-stream"),
        (samples.zip_archive({"a.txt": b"hi"}), "application/zip", "files.zip", ".zip"),
    ],
)
def test_an_unsupported_type_is_refused_and_named(data, content_type, file_name, named):
    message = failure(data, content_type, file_name)

    assert message.startswith("Unsupported file type: ")
    assert named in message


@pytest.mark.parametrize(
    ("data", "content_type"),
    [
        (b"word " * 50, "text/plain"),
        (b"# Title\n\n" + b"word " * 50, "text/markdown"),
        (b"<p>" + b"word " * 50 + b"</p>", "text/html"),
        (b'{"text": "' + b"word " * 50 + b'"}', "application/json"),
    ],
)
def test_text_over_the_size_limit_is_refused(data, content_type):
    message = failure(data, content_type, "big", ExtractionLimits(max_text_chars=100))

    assert message == "The extracted text is too large: more than the limit of 100 characters."


def test_docx_text_over_the_size_limit_is_refused():
    message = failure(
        samples.docx_document(), samples.DOCX_TYPE, "a.docx", ExtractionLimits(max_text_chars=20)
    )

    assert "too large" in message


def test_damaged_files_of_every_format_fail_only_with_extraction_failed():
    originals = {
        "application/pdf": samples.pdf(["Some text", "More text"]),
        samples.DOCX_TYPE: samples.docx_document(),
        "image/png": samples.image("PNG"),
        "image/jpeg": samples.image("JPEG"),
        "image/webp": samples.image("WEBP"),
        "application/json": b'{"a": [1, 2, {"b": "c"}]}',
        "text/csv": b'a,b\n"1",2\n',
        "text/html": b"<html><body><h1>x</h1><p>y</p></body></html>",
    }
    generator = random.Random(20240501)

    for content_type, data in originals.items():
        variants = [data[: len(data) * share // 4] for share in (1, 2, 3)]
        for _ in range(6):
            damaged = bytearray(data)
            for _ in range(8):
                damaged[generator.randrange(len(damaged))] = generator.randrange(256)
            variants.append(bytes(damaged))
        for variant in variants:
            try:
                extract(variant, content_type, "damaged")
            except ExtractionFailed as error:
                assert error.message.endswith(".")
