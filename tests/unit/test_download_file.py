"""`DownloadFile`: a signed address of a file's original, extracted text or page image."""

from __future__ import annotations

from datetime import timedelta

import pytest

from application.use_cases.download_file import DownloadFile, DownloadFileQuery
from domain.errors import Invalid, NotFound
from tests.fakes import FakeClock
from tests.unit.test_file_use_cases import FILE_ID, associate, command
from tests.unit.test_knowledge_base_use_cases import create

FOLDER = f"orgs/org_a/files/{FILE_ID}/"


async def setup(world, caller):
    kb_id = await create(world, caller)
    record = await associate(world).execute(command(caller, kb_id=kb_id))
    clock = FakeClock()
    return kb_id, record, clock, DownloadFile(world.kbs, world.files, world.storage, clock)


def query(caller, kb_id, **fields):
    return DownloadFileQuery.parse(caller=caller, kb_id=kb_id, file_id=FILE_ID, **fields)


async def test_the_original_is_the_default_with_its_name(world, caller):
    kb_id, record, clock, use_case = await setup(world, caller)
    url = await use_case.execute(query(caller, str(kb_id)))
    expires = (clock.now() + timedelta(minutes=5)).isoformat()
    assert url == f"https://storage.test/{record.file_key}?download=Report 2026.pdf&exp={expires}"


async def test_the_content_once_extracted(world, caller):
    kb_id, record, _, use_case = await setup(world, caller)
    with pytest.raises(NotFound, match="File content not found"):
        await use_case.execute(query(caller, kb_id, part="content"))
    await world.storage.put(record.content_key, b"# text", content_type="text/markdown")
    url = await use_case.execute(query(caller, kb_id, part="content"))
    assert url.startswith(f"https://storage.test/{FOLDER}content.md?download=Report 2026.pdf.md")


async def test_page_images_from_one(world, caller):
    kb_id, record, _, use_case = await setup(world, caller)
    with pytest.raises(NotFound, match="Page image not found"):
        await use_case.execute(query(caller, kb_id, part="image", page=1))
    keys = [f"{FOLDER}images/page-1.png", f"{FOLDER}images/page-2.png"]
    await world.files.set_image_keys("org_a", record.id, keys)
    url = await use_case.execute(query(caller, kb_id, part="image", page="2"))
    assert url.startswith(f"https://storage.test/{keys[1]}?download=Report 2026.pdf-page-2.png")
    with pytest.raises(NotFound, match="Page image not found"):
        await use_case.execute(query(caller, kb_id, part="image", page=3))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kb_id": "x"}, "Valid knowledge base ID is required"),
        ({"kb_id": None}, "Valid knowledge base ID is required"),
        ({"file_id": "nope"}, "Valid file ID is required"),
        ({"file_id": None}, "Valid file ID is required"),
        ({"part": "thumbnail"}, "part must be one of"),
        ({"part": "image"}, "page must be a positive integer"),
        ({"part": "image", "page": "0"}, "page must be a positive integer"),
        ({"part": "image", "page": "²"}, "page must be a positive integer"),
        ({"part": "image", "page": "-1"}, "page must be a positive integer"),
        ({"part": "original", "page": "1"}, "only with part=image"),
    ],
)
async def test_bad_parameters_are_400(world, caller, fields, message):
    kb_id, _, _, use_case = await setup(world, caller)
    base = {"caller": caller, "kb_id": kb_id, "file_id": FILE_ID}
    with pytest.raises(Invalid, match=message):
        await use_case.execute(DownloadFileQuery.parse(**{**base, **fields}))


async def test_a_foreign_or_missing_file_looks_missing(world, caller, stranger):
    kb_id, _, _, use_case = await setup(world, caller)
    with pytest.raises(NotFound, match="Knowledge base not found"):
        await use_case.execute(query(stranger, kb_id))
    with pytest.raises(NotFound, match="Knowledge base not found"):
        await use_case.execute(query(caller, kb_id + 1))
    other = DownloadFileQuery.parse(
        caller=caller, kb_id=kb_id, file_id="6b0d0c8e-3f43-4a52-9d2b-0d8f6f1f9a11"
    )
    with pytest.raises(NotFound, match="File not found"):
        await use_case.execute(other)
