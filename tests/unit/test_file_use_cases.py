from __future__ import annotations

from collections import namedtuple
from datetime import timedelta
from uuid import uuid4

import pytest

from application.ports.job_queue import PROCESS_FILE
from application.use_cases.associate_file import AssociateFile, AssociateFileCommand
from application.use_cases.create_upload import CreateUpload, CreateUploadCommand
from application.use_cases.delete_file import DeleteFile, DeleteFileCommand
from application.use_cases.list_files import ListFiles, ListFilesQuery
from domain.errors import Conflict, Invalid, NotFound
from domain.files import (
    FILE_FIELDS_REQUIRED,
    FILE_VIEW_FIELDS,
    NewFile,
    ProcessingStatus,
    view_values,
)
from domain.uploads import UploadPolicy
from tests.fakes import FakeClock
from tests.unit.test_knowledge_base_use_cases import create

FILE_ID = "5b0d0c8e-3f43-4a52-9d2b-0d8f6f1f9a11"
ListedFile = namedtuple("ListedFile", FILE_VIEW_FIELDS)


def command(caller, **overrides):
    fields = {
        "kb_id": 1,
        "file_id": FILE_ID,
        "file_name": "Report 2026.pdf",
        "file_key": f"orgs/{caller.org_id}/files/{FILE_ID}/Report_2026.pdf",
        "content_key": f"orgs/{caller.org_id}/files/{FILE_ID}/content.md",
        "content_type": "application/pdf",
        "file_size": 1234,
        "user_metadata": {"team": "legal"},
    }
    fields.update(overrides)
    return AssociateFileCommand.parse(caller=caller, **fields)


ORIGINAL_KEY = f"orgs/org_a/files/{FILE_ID}/Report_2026.pdf"


def associate(world, max_size=10_000, *, uploaded=True):
    """The use case with the storage wired in; the command's upload is issued and its original
    stored (1234 bytes of application/pdf) unless `uploaded` is False."""
    world.uploads.issue("org_a", FILE_ID, ORIGINAL_KEY)
    if uploaded:
        world.storage.objects[ORIGINAL_KEY] = b"x" * 1234
        world.storage.content_types[ORIGINAL_KEY] = "application/pdf"
    return AssociateFile(
        world.kbs, world.files, world.uploads, world.jobs, world.uow, world.storage, max_size
    )


def delete_file(world, clock=None):
    return DeleteFile(
        world.kbs, world.files, world.storage, world.uow, world.uploads, world.jobs,
        clock or FakeClock(),
    )  # fmt: skip


def create_upload(world, clock=None):
    return CreateUpload(
        world.storage, world.uploads, world.uow, clock or FakeClock(), UploadPolicy(max_size=1000)
    )


async def test_associate_creates_a_parsing_record_and_queues_its_processing(world, caller):
    await create(world, caller)
    record = await associate(world).execute(command(caller))
    assert record.processing_status is ProcessingStatus.PARSING
    assert (record.file_id, record.file_size, record.user_metadata) == (
        FILE_ID,
        1234,
        {"team": "legal"},
    )
    (job,) = world.jobs.jobs
    assert job.kind == PROCESS_FILE
    assert job.payload == {"orgId": "org_a", "fileRecordId": record.id}
    assert world.uow.commits == 2


@pytest.mark.parametrize(
    "missing", ["file_id", "file_name", "file_key", "content_key", "content_type"]
)
@pytest.mark.parametrize("value", [None, "", "   "])
async def test_each_missing_file_field_has_the_spec_message(world, caller, missing, value):
    await create(world, caller)
    with pytest.raises(Invalid) as error:
        await associate(world).execute(command(caller, **{missing: value}))
    assert error.value.message == FILE_FIELDS_REQUIRED
    assert world.files.rows == {} and world.jobs.jobs == []


async def test_missing_file_fields_are_reported_before_a_bad_kb_id(world, caller):
    with pytest.raises(Invalid, match="File ID, name"):
        await associate(world).execute(command(caller, kb_id=None, file_name=None))


@pytest.mark.parametrize("kb_id", [None, "x", 0, -1, 2.5, False, [1]])
async def test_kb_id_must_be_a_positive_integer(world, caller, kb_id):
    with pytest.raises(Invalid, match="Valid knowledge base ID is required"):
        await associate(world).execute(command(caller, kb_id=kb_id))


async def test_a_foreign_knowledge_base_looks_missing(world, caller, stranger):
    await create(world, stranger)
    with pytest.raises(NotFound, match="Knowledge base not found"):
        await associate(world).execute(command(caller))
    assert world.files.rows == {}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"file_key": f"orgs/org_b/files/{FILE_ID}/x.pdf"}, "fileKey must be a storage key"),
        ({"file_key": f"orgs/org_a/files/{FILE_ID}/../../org_b/x"}, "fileKey must be a storage"),
        ({"content_key": "elsewhere/content.md"}, "contentKey must be a storage key"),
        ({"file_id": "not-a-uuid"}, "File ID must be a UUID"),
        ({"content_type": "pdf"}, "Content type must be a MIME type"),
        ({"file_size": -1}, "File size must be a non-negative integer"),
        ({"file_size": 10_001}, "exceeds the maximum upload size"),
        ({"file_name": "a/b.pdf"}, "must not contain a path separator"),
        ({"user_metadata": ["x"]}, "userMetadata must be an object"),
        ({"user_metadata": {"team": "le\x00gal"}}, "userMetadata"),
        ({"user_metadata": {"a\x00b": 1}}, "userMetadata"),
    ],
)
async def test_malformed_fields_are_refused(world, caller, overrides, message):
    await create(world, caller)
    with pytest.raises(Invalid) as error:
        await associate(world).execute(command(caller, **overrides))
    assert message in error.value.message
    assert world.files.rows == {}


async def test_a_file_id_is_associated_once(world, caller):
    await create(world, caller)
    await associate(world).execute(command(caller))
    with pytest.raises(Conflict):
        await associate(world).execute(command(caller))
    assert len(world.files.rows) == 1 and len(world.jobs.jobs) == 1


def listing(caller, kb_id, **page):
    return ListFilesQuery.parse(caller=caller, kb_id=kb_id, view=ListedFile, **page)


async def test_list_files_checks_the_knowledge_base(world, caller, stranger):
    kb_id = await create(world, caller)
    record = await associate(world).execute(command(caller, kb_id=kb_id))
    page = await ListFiles(world.kbs, world.files).execute(listing(caller, "1"))
    assert page.files == [ListedFile(*view_values(record))]
    assert page.files[0].file_id == FILE_ID and page.files[0].processing_status == "parsing"
    assert not page.paged and page.next_cursor is None
    with pytest.raises(NotFound):
        await ListFiles(world.kbs, world.files).execute(listing(stranger, 1))
    with pytest.raises(Invalid, match="Valid knowledge base ID is required"):
        await ListFiles(world.kbs, world.files).execute(listing(caller, "1x"))


async def test_list_files_a_page_at_a_time_hands_the_next_pages_cursor(world, caller):
    kb_id = await create(world, caller)
    ids = []
    for _ in range(3):
        file_id = str(uuid4())
        new = NewFile(
            org_id=caller.org_id, knowledge_base_id=kb_id, file_id=file_id, file_name="a.md",
            file_key=f"orgs/{caller.org_id}/files/{file_id}/a.md",
            content_key=f"orgs/{caller.org_id}/files/{file_id}/content.md",
            content_type="text/markdown", file_size=1, user_metadata=None,
        )  # fmt: skip
        ids.append((await world.files.add(new)).id)
    use_case = ListFiles(world.kbs, world.files)
    first = await use_case.execute(listing(caller, kb_id, limit=2))
    assert [f.id for f in first.files] == ids[:0:-1] and first.paged
    rest = await use_case.execute(listing(caller, kb_id, limit=2, cursor=first.next_cursor))
    assert [f.id for f in rest.files] == ids[:1] and rest.next_cursor is None
    with pytest.raises(Invalid):
        await use_case.execute(listing(caller, kb_id, limit=0))


async def test_delete_file_removes_record_and_objects(world, caller):
    kb_id = await create(world, caller)
    record = await associate(world).execute(command(caller, kb_id=kb_id))
    world.storage.objects[record.file_key] = b"%PDF"
    world.storage.objects["orgs/org_a/files/other/keep.txt"] = b"x"
    use_case = delete_file(world)
    report = await use_case.execute(
        DeleteFileCommand.parse(caller=caller, kb_id=kb_id, file_id=FILE_ID)
    )
    assert report.leftover_prefixes == []
    assert world.files.rows == {}
    assert list(world.storage.objects) == ["orgs/org_a/files/other/keep.txt"]


@pytest.mark.parametrize(
    ("kb_id", "file_id", "error", "message"),
    [
        ("x", FILE_ID, Invalid, "Valid knowledge base ID is required"),
        (1, "nope", Invalid, "Valid file ID is required"),
        (1, None, Invalid, "Valid file ID is required"),
        (2, FILE_ID, NotFound, "Knowledge base not found"),
        (1, "6b0d0c8e-3f43-4a52-9d2b-0d8f6f1f9a11", NotFound, "File not found"),
    ],
)
async def test_delete_file_errors(world, caller, kb_id, file_id, error, message):
    await create(world, caller)
    await associate(world).execute(command(caller))
    use_case = delete_file(world)
    with pytest.raises(error, match=message):
        await use_case.execute(DeleteFileCommand.parse(caller=caller, kb_id=kb_id, file_id=file_id))
    assert len(world.files.rows) == 1


async def test_create_upload_hands_out_keys_in_the_callers_organization(world, caller):
    clock = FakeClock()
    use_case = create_upload(world, clock)
    prepared = await use_case.execute(
        CreateUploadCommand.parse(
            caller=caller, file_name="Q3 résumé.pdf", content_type="application/pdf", file_size=500
        )
    )
    folder = f"orgs/org_a/files/{prepared.file_id}/"
    assert prepared.file_key == folder + "Q3_resume.pdf"
    assert prepared.content_key == folder + "content.md"
    assert prepared.expires_at == clock.now() + timedelta(minutes=15)
    assert prepared.upload.url.endswith("size=500")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"file_name": None}, "fileName is required"),
        ({"content_type": ""}, "contentType is required"),
        ({"file_size": 1001}, "exceeds the maximum upload size"),
        ({"file_size": None}, "fileSize is required"),
        ({"content_type": "text"}, "Content type must be a MIME type"),
    ],
)
async def test_create_upload_refuses_bad_input(world, caller, fields, message):
    use_case = create_upload(world)
    base = {"file_name": "a.txt", "content_type": "text/plain", "file_size": 10}
    with pytest.raises(Invalid, match=message):
        await use_case.execute(CreateUploadCommand.parse(caller=caller, **{**base, **fields}))
