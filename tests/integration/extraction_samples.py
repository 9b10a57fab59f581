"""Builds the sample files the extraction tests read, in memory, so no binary fixture is kept."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

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
