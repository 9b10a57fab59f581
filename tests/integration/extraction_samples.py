"""Builds the sample files the extraction tests read, in memory, so no binary fixture is kept."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from collections.abc import Collection

import docx
from fpdf import FPDF
from PIL import Image

DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def pdf(
    page_texts: list[str],
    *,
    user_password: str | None = None,
    owner_password: str | None = None,
) -> bytes:
    """An A4 PDF with one page per text (an empty text leaves its page blank, like a scan)."""
    document = FPDF(unit="pt", format="A4")
    if owner_password or user_password:
        document.set_encryption(
            owner_password=owner_password or "owner", user_password=user_password or ""
        )
    document.set_font("helvetica", size=12)
    for text in page_texts:
        document.add_page()
        if text:
            document.multi_cell(0, 16, text)
    return bytes(document.output())


def text_and_colour_pdf(colour: tuple[int, int, int]) -> bytes:
    """Two A4 pages: black text, then a filled rectangle in `colour`."""
    document = FPDF(unit="pt", format="A4")
    document.set_font("helvetica", size=12)
    document.add_page()
    document.multi_cell(0, 16, "Black text only")
    document.add_page()
    document.set_fill_color(*colour)
    document.rect(50, 50, 200, 100, style="F")
    return bytes(document.output())


def docx_document() -> bytes:
    """A Word document with a title, headings, a paragraph, a bulleted list and a table."""
    document = docx.Document()
    document.add_heading("Quarterly Report", level=0)
    document.add_heading("Summary", level=1)
    document.add_paragraph("Revenue grew by 12 percent.")
    document.add_heading("Details", level=2)
    document.add_paragraph("First point", style="List Bullet")
    document.add_paragraph("Second point", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    for (row, column), text in {
        (0, 0): "Region",
        (0, 1): "Sales",
        (1, 0): "North",
        (1, 1): "42",
    }.items():
        table.cell(row, column).text = text
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def empty_docx() -> bytes:
    """A Word document with no text at all."""
    buffer = io.BytesIO()
    docx.Document().save(buffer)
    return buffer.getvalue()


def zip_archive(entries: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A zip of `entries`, compressed with `compression`."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def docx_bomb(inflated_bytes: int) -> bytes:
    """A DOCX-shaped zip whose one extra part inflates from a few KiB to `inflated_bytes`."""
    document = docx_document()
    with zipfile.ZipFile(io.BytesIO(document)) as original:
        entries = {name: original.read(name) for name in original.namelist()}
    entries["word/media/padding.bin"] = bytes(inflated_bytes)
    return zip_archive(entries)


def image(format_name: str, size: tuple[int, int] = (40, 30), **save_options: object) -> bytes:
    """A small solid image in `format_name` (a Pillow format such as PNG, JPEG, GIF, WEBP)."""
    mode = "RGBA" if save_options.pop("alpha", False) else "RGB"
    picture = Image.new(mode, size, (200, 30, 30, 128) if mode == "RGBA" else (200, 30, 30))
    buffer = io.BytesIO()
    picture.save(buffer, format=format_name, **save_options)
    return buffer.getvalue()


def png_header(width: int, height: int) -> bytes:
    """The signature and IHDR chunk of a PNG of the given size, without any pixel data."""
    body = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    crc = zlib.crc32(b"IHDR" + body)
    return PNG_SIGNATURE + struct.pack(">I", 13) + b"IHDR" + body + struct.pack(">I", crc)


def png_pixels(data: bytes) -> Image.Image:
    """A PNG decoded with Pillow."""
    with Image.open(io.BytesIO(data)) as picture:
        picture.load()
        return picture


def png_dimensions(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG, read back with Pillow (which also checks it decodes)."""
    with Image.open(io.BytesIO(data)) as picture:
        picture.load()
        return picture.size


# --- Hostile files, written byte by byte ---------------------------------------------------


def deflate_repeated(chunk: bytes, times: int) -> bytes:
    """zlib data that inflates to `chunk` repeated `times` times, compressing `chunk` only once.

    A full flush makes the compressor forget what came before, so every later copy of the
    chunk compresses to the same bytes; the adler-32 checksum at the end covers all of them.
    """
    compressor = zlib.compressobj(9)
    first = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    again = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    end = compressor.flush(zlib.Z_FINISH)[:-4]
    checksum = 1
    for _ in range(times):
        checksum = zlib.adler32(chunk, checksum)
    return first + again * (times - 1) + end + checksum.to_bytes(4, "big")


def stream_object(data: bytes, entries: bytes = b"/Filter /FlateDecode") -> bytes:
    """The body of a stream object holding `data` as it is (already encoded)."""
    return b"<< %s /Length %d >>\nstream\n" % (entries, len(data)) + data + b"\nendstream"


def raw_pdf(objects: dict[int, bytes], *, object_stream: Collection[int] = ()) -> bytes:
    """A PDF of numbered object bodies, object 1 its catalog.

    The objects in `object_stream` are stored in a compressed object stream, listed by a
    cross-reference stream (as PDF 1.5 writers do); without any, a classic xref table.
    """
    out = bytearray(b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n")
    offsets: dict[int, int] = {}
    for number, body in objects.items():
        if number not in object_stream:
            offsets[number] = len(out)
            out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    size = max(objects) + 3
    if not object_stream:
        xref = len(out)
        out += b"xref\n0 %d\n0000000000 65535 f \n" % (max(objects) + 1)
        for number in range(1, max(objects) + 1):
            if number in offsets:
                out += b"%010d 00000 n \n" % offsets[number]
            else:
                out += b"0000000000 65535 f \n"
        out += b"trailer\n<< /Size %d /Root 1 0 R >>\n" % (max(objects) + 1)
        return bytes(out + b"startxref\n%d\n%%%%EOF\n" % xref)
    inside = sorted(object_stream)
    body = b""
    positions = []
    for number in inside:
        positions.append(len(body))
        body += objects[number] + b"\n"
    header = b"".join(b"%d %d " % pair for pair in zip(inside, positions, strict=True))
    packed = zlib.compress(header + body)
    holder, xref_number = size - 2, size - 1
    offsets[holder] = len(out)
    out += (
        b"%d 0 obj\n" % holder
        + stream_object(
            packed,
            b"/Type /ObjStm /N %d /First %d /Filter /FlateDecode" % (len(inside), len(header)),
        )
        + b"\nendobj\n"
    )
    offsets[xref_number] = len(out)
    rows = bytearray()
    for number in range(size):
        if number in offsets:
            rows += struct.pack(">BIH", 1, offsets[number], 0)
        elif number in object_stream:
            rows += struct.pack(">BIH", 2, holder, inside.index(number))
        else:
            rows += struct.pack(">BIH", 0, 0, 0)
    entries = b"/Type /XRef /Size %d /W [1 4 2] /Root 1 0 R /Filter /FlateDecode" % size
    out += b"%d 0 obj\n" % xref_number + stream_object(zlib.compress(bytes(rows)), entries)
    return bytes(out + b"\nendobj\nstartxref\n%d\n%%%%EOF\n" % offsets[xref_number])


def one_page_pdf(
    contents: bytes,
    *,
    resources: bytes = b"<< /Font << /F1 2 0 R >> >>",
    page_entries: bytes = b"",
    extra: dict[int, bytes] | None = None,
    object_stream: Collection[int] = (),
) -> bytes:
    """A one-page PDF whose page has `contents` as its /Contents value.

    Objects 1 to 4 are the catalog, Helvetica, the page and the page tree; `extra` adds
    objects from 5 on.
    """
    page = b"<< /Type /Page /Parent 4 0 R /MediaBox [0 0 612 792] /Contents %s /Resources %s %s >>"
    objects = {
        1: b"<< /Type /Catalog /Pages 4 0 R >>",
        2: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        3: page % (contents, resources, page_entries),
        4: b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        **(extra or {}),
    }
    return raw_pdf(objects, object_stream=object_stream)


def lzw(data: bytes) -> bytes:
    """`data` LZW-encoded as PDF's LZWDecode reads it (early change, a clear code first)."""
    table = {bytes((code,)): code for code in range(256)}
    next_code, width = 258, 9
    bits, count, out = 0, 0, bytearray()

    def emit(code: int) -> None:
        nonlocal bits, count
        bits, count = (bits << width) | code, count + width
        while count >= 8:
            count -= 8
            out.append((bits >> count) & 0xFF)
        bits &= (1 << count) - 1

    emit(256)
    word = b""
    for byte in data:
        longer = word + bytes((byte,))
        if longer in table:
            word = longer
            continue
        emit(table[word])
        table[longer] = next_code
        next_code += 1
        if next_code + 1 >= 4096:
            emit(256)
            table = {bytes((code,)): code for code in range(256)}
            next_code, width = 258, 9
        elif next_code + 1 > (1 << width):
            width += 1
        word = bytes((byte,))
    if word:
        emit(table[word])
    emit(257)
    if count:
        out.append((bits << (8 - count)) & 0xFF)
    return bytes(out)


def run_length(data: bytes) -> bytes:
    """`data` RunLength-encoded: runs of up to 128 equal bytes or 128 literal ones, then the end
    marker."""
    out = bytearray()
    literal = bytearray()
    position = 0
    while position < len(data):
        run = 1
        while run < 128 and position + run < len(data) and data[position + run] == data[position]:
            run += 1
        if (run > 2 or len(literal) == 128) and literal:
            out += bytes((len(literal) - 1,)) + literal
            literal.clear()
        if run > 2:
            out += bytes((257 - run, data[position]))
            position += run
        else:
            literal.append(data[position])
            position += 1
    if literal:
        out += bytes((len(literal) - 1,)) + literal
    return bytes(out + b"\x80")


def docx_with_paragraphs(paragraph: bytes, count: int) -> bytes:
    """A DOCX whose body is `paragraph` repeated `count` times, compressed as it is written."""
    with zipfile.ZipFile(io.BytesIO(docx_document())) as original:
        entries = {name: original.read(name) for name in original.namelist()}
    head, _, tail = entries.pop("word/document.xml").partition(b"<w:body>")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
        with archive.open("word/document.xml", "w") as part:
            part.write(head + b"<w:body>")
            block = paragraph * 10_000
            for _ in range(count // 10_000):
                part.write(block)
            part.write(paragraph * (count % 10_000) + tail)
    return buffer.getvalue()
