"""Scans through the whole pipeline: an image and a PDF with a scanned page are uploaded over
HTTP, read by OCR in the worker's extraction sandbox, counted in the file record's `ocrPages`,
and found by `POST /kb/search` on their page; a damaged image completes with what it has."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import pytest
from fpdf import FPDF
from litestar.testing import AsyncTestClient

from adapters.extraction.ocr import rapidocr_installed
from entrypoints.http.app import create_app
from tests.http.helpers import make_kb
from tests.http.processing_support import EmbedderOverride, settle, upload
from tests.integration.test_ocr_extraction import encoded, text_picture

pytestmark = pytest.mark.skipif(not rapidocr_installed(), reason="rapidocr is not installed")


@pytest.fixture
async def client(settings, database, clean, registry) -> AsyncIterator[AsyncTestClient]:
    async with AsyncTestClient(app=create_app(settings, database, EmbedderOverride(registry))) as c:
        yield c


def bilevel_png(line: str, width: int = 700) -> bytes:
    """A one-bit PNG of a line of text, as a fax or office scanner makes (and small enough
    for the tests' upload limit)."""
    return encoded(text_picture([line], size=(width, 120)).convert("1"), "PNG", optimize=True)


def half_scanned_pdf(typed: str, scanned: str) -> bytes:
    document = FPDF(unit="pt", format="A4")
    document.set_font("helvetica", size=12)
    document.add_page()
    document.multi_cell(0, 16, typed)
    document.add_page()
    document.image(io.BytesIO(bilevel_png(scanned)), x=40, y=40, w=400)
    return bytes(document.output())


async def found(client, who, kb_id: int, query: str, file_id: str) -> list[dict]:
    """The results of `query` from the file `file_id` whose text holds its first word."""
    response = await client.post(
        "/kb/search", json={"kbId": kb_id, "query": query}, headers=who.headers
    )
    assert response.status_code == 200, response.text
    word = query.split(maxsplit=1)[0]
    return [
        result
        for result in response.json()["results"]
        if result["fileId"] == file_id and word in result["text"].lower()
    ]


async def test_scans_are_read_counted_in_ocr_pages_and_found_on_their_page(client, alice, worker):
    kb = await make_kb(client, alice)
    png = await upload(
        client, alice, kb["id"], "poster.png", "image/png", bilevel_png("Lighthouse keeper")
    )
    pdf = await upload(
        client,
        alice,
        kb["id"],
        "minutes.pdf",
        "application/pdf",
        half_scanned_pdf("The typed page is about budgets.", "Walrus invoice overdue"),
    )
    whole = bilevel_png("Truncated halfway")
    damaged = await upload(
        client, alice, kb["id"], "damaged.png", "image/png", whole[: len(whole) // 2]
    )
    assert png["ocrPages"] == 0  # not read yet

    async with worker():
        files = await settle(client, alice, kb["id"], count=3, within=180)

    by_id = {f["fileId"]: f for f in files}
    for record in (png, pdf, damaged):
        done = by_id[record["fileId"]]
        assert done["processingStatus"] == "completed", done
        assert done["processingError"] is None
    assert by_id[png["fileId"]]["ocrPages"] == 1
    assert by_id[pdf["fileId"]]["ocrPages"] == 1
    assert by_id[damaged["fileId"]]["ocrPages"] == 0
    assert len(by_id[pdf["fileId"]]["imageKeys"]) == 2

    (poster,) = await found(client, alice, kb["id"], "lighthouse keeper", png["fileId"])
    assert "lighthouse" in poster["text"].lower() and poster["pageNumber"] == 1
    (scan,) = await found(client, alice, kb["id"], "walrus invoice", pdf["fileId"])
    assert "walrus" in scan["text"].lower() and scan["pageNumber"] == 2
