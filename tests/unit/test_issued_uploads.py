"""Issued uploads (issue 31, 2.6): `CreateUpload` records each upload it signs; association
accepts only a recorded upload whose file was neither associated nor deleted; deleting a file
or its knowledge base marks its upload deleted and queues the purge of its folder for after the
address has expired; the storage's upload endpoint admits only a recorded, unused upload."""

from __future__ import annotations

from datetime import timedelta

import pytest

from application.ports.job_queue import PURGE_DELETED_UPLOAD
from application.use_cases.admit_upload import AdmitUpload, AdmitUploadCommand
from application.use_cases.associate_file import AssociateFile, AssociateFileCommand
from application.use_cases.create_upload import CreateUpload, CreateUploadCommand
from application.use_cases.delete_file import DeleteFile, DeleteFileCommand
from application.use_cases.delete_knowledge_base import (
    DeleteKnowledgeBase,
    DeleteKnowledgeBaseCommand,
)
from application.use_cases.purge_deleted_upload import (
    PurgeDeletedUpload,
    PurgeDeletedUploadCommand,
)
from domain.errors import Conflict, Forbidden, Invalid
from domain.uploads import (
    PURGE_MARGIN,
    UPLOAD_ALREADY_USED,
    UPLOAD_FILE_DELETED,
    UPLOAD_NOT_ISSUED,
    UploadPolicy,
    UploadState,
)
from tests.fakes import FakeClock
from tests.unit.test_knowledge_base_use_cases import create

TTL = timedelta(minutes=15)


async def presign(world, caller, clock):
    use_case = CreateUpload(
        world.storage, world.uploads, world.uow, clock, UploadPolicy(max_size=1000, url_ttl=TTL)
    )
    return await use_case.execute(
        CreateUploadCommand.parse(
            caller=caller, file_name="a.txt", content_type="text/plain", file_size=5
        )
    )


def association(caller, kb_id, prepared):
    return AssociateFileCommand.parse(
        caller=caller, kb_id=kb_id, file_id=prepared.file_id, file_name="a.txt",
        file_key=prepared.file_key, content_key=prepared.content_key, content_type="text/plain",
        file_size=5,
    )  # fmt: skip


def associate(world):
    return AssociateFile(
        world.kbs, world.files, world.uploads, world.jobs, world.uow, world.storage
    )


def delete_file(world, clock):
    return DeleteFile(
        world.kbs, world.files, world.storage, world.uow, world.uploads, world.jobs, clock
    )


async def uploaded(world, caller, clock, kb_id):
    """An upload issued, its bytes stored and the file associated."""
    prepared = await presign(world, caller, clock)
    await world.storage.put(prepared.file_key, b"hello", content_type="text/plain")
    await associate(world).execute(association(caller, kb_id, prepared))
    return prepared


async def test_a_presign_records_the_upload_it_signs(world, caller):
    clock = FakeClock()
    prepared = await presign(world, caller, clock)
    issued = await world.uploads.get("org_a", prepared.file_id)
    assert issued is not None and world.uow.commits == 1
    assert (issued.file_key, issued.content_type, issued.expires_at, issued.state) == (
        prepared.file_key, "text/plain", clock.now() + TTL, UploadState.ISSUED,
    )  # fmt: skip


async def test_association_accepts_only_an_upload_it_issued(world, caller):
    kb_id = await create(world, caller)
    prepared = await presign(world, caller, FakeClock())
    await world.storage.put(prepared.file_key, b"hello", content_type="text/plain")
    world.uploads.rows.clear()
    with pytest.raises(Invalid, match=UPLOAD_NOT_ISSUED) as refused:
        await associate(world).execute(association(caller, kb_id, prepared))
    assert [d["field"] for d in refused.value.details] == ["fileKey"]
    assert world.files.rows == {}


async def test_association_marks_the_upload_associated(world, caller):
    kb_id = await create(world, caller)
    prepared = await uploaded(world, caller, FakeClock(), kb_id)
    issued = await world.uploads.get("org_a", prepared.file_id)
    assert issued is not None and issued.state is UploadState.ASSOCIATED
    with pytest.raises(Conflict, match="already associated"):
        await associate(world).execute(association(caller, kb_id, prepared))


async def test_a_deleted_file_queues_the_purge_of_its_folder_after_its_address_expires(
    world, caller
):
    clock = FakeClock()
    kb_id = await create(world, caller)
    prepared = await uploaded(world, caller, clock, kb_id)
    clock.advance(60)
    await delete_file(world, clock).execute(
        DeleteFileCommand.parse(caller=caller, kb_id=kb_id, file_id=prepared.file_id)
    )
    issued = await world.uploads.get("org_a", prepared.file_id)
    assert issued is not None and issued.state is UploadState.DELETED
    (job,) = [j for j in world.jobs.jobs if j.kind == PURGE_DELETED_UPLOAD]
    assert job.payload == {"orgId": "org_a", "fileId": prepared.file_id}
    assert job.delay == TTL + PURGE_MARGIN - timedelta(seconds=60)


async def test_an_address_long_expired_needs_no_purge(world, caller):
    clock = FakeClock()
    kb_id = await create(world, caller)
    prepared = await uploaded(world, caller, clock, kb_id)
    clock.current += TTL + PURGE_MARGIN
    await delete_file(world, clock).execute(
        DeleteFileCommand.parse(caller=caller, kb_id=kb_id, file_id=prepared.file_id)
    )
    assert [j for j in world.jobs.jobs if j.kind == PURGE_DELETED_UPLOAD] == []
    assert (await world.uploads.get("org_a", prepared.file_id)).state is UploadState.DELETED


async def test_a_deleted_knowledge_base_marks_every_upload_of_its_files_deleted(world, caller):
    clock = FakeClock()
    kb_id = await create(world, caller)
    first = await uploaded(world, caller, clock, kb_id)
    second = await uploaded(world, caller, clock, kb_id)
    await DeleteKnowledgeBase(
        world.kbs, world.files, world.storage, world.uow, world.uploads, world.jobs, clock
    ).execute(DeleteKnowledgeBaseCommand.parse(caller=caller, kb_id=kb_id))
    for prepared in (first, second):
        assert (await world.uploads.get("org_a", prepared.file_id)).state is UploadState.DELETED
    purged = {j.payload["fileId"] for j in world.jobs.jobs if j.kind == PURGE_DELETED_UPLOAD}
    assert purged == {first.file_id, second.file_id}


async def test_a_replay_stored_after_the_deletion_is_removed_and_never_associated(world, caller):
    clock = FakeClock()
    kb_id = await create(world, caller)
    prepared = await uploaded(world, caller, clock, kb_id)
    await delete_file(world, clock).execute(
        DeleteFileCommand.parse(caller=caller, kb_id=kb_id, file_id=prepared.file_id)
    )
    # The bucket took a replay of the address (S3 checks only the signature).
    await world.storage.put(prepared.file_key, b"again", content_type="text/plain")
    with pytest.raises(Conflict, match=UPLOAD_FILE_DELETED):
        await associate(world).execute(association(caller, kb_id, prepared))
    assert world.storage.objects == {} and world.files.rows == {}
    await world.storage.put(prepared.file_key, b"again", content_type="text/plain")
    purge = PurgeDeletedUpload(world.uploads, world.storage)
    command = PurgeDeletedUploadCommand(org_id="org_a", file_id=prepared.file_id)
    assert await purge.execute(command) == 1 and world.storage.objects == {}


async def test_the_purge_leaves_a_file_that_was_not_deleted_alone(world, caller):
    clock = FakeClock()
    kb_id = await create(world, caller)
    prepared = await uploaded(world, caller, clock, kb_id)
    purge = PurgeDeletedUpload(world.uploads, world.storage)
    command = PurgeDeletedUploadCommand(org_id="org_a", file_id=prepared.file_id)
    assert await purge.execute(command) == 0
    assert list(world.storage.objects) == [prepared.file_key]


async def test_the_upload_endpoint_admits_only_an_issued_unused_upload(world, caller):
    clock = FakeClock()
    kb_id = await create(world, caller)
    admit = AdmitUpload(world.uploads)
    prepared = await presign(world, caller, clock)

    def command(key=prepared.file_key):
        return AdmitUploadCommand(org_id="org_a", file_id=prepared.file_id, file_key=key)

    await admit.execute(command())
    with pytest.raises(Forbidden, match=UPLOAD_NOT_ISSUED):
        await admit.execute(command(prepared.file_key + "x"))
    with pytest.raises(Forbidden, match=UPLOAD_NOT_ISSUED):
        await admit.execute(AdmitUploadCommand(org_id="org_b", file_id=prepared.file_id,
                                               file_key=prepared.file_key))  # fmt: skip
    await world.storage.put(prepared.file_key, b"hello", content_type="text/plain")
    await associate(world).execute(association(caller, kb_id, prepared))
    with pytest.raises(Conflict, match=UPLOAD_ALREADY_USED):
        await admit.execute(command())
    await delete_file(world, clock).execute(
        DeleteFileCommand.parse(caller=caller, kb_id=kb_id, file_id=prepared.file_id)
    )
    with pytest.raises(Conflict, match=UPLOAD_FILE_DELETED):
        await admit.execute(command())
