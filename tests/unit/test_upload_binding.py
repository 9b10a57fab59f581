"""Storage keys are bound to their file id, the stored object's real size and type are checked
at association, and hostile file names are refused at presign (issue 12)."""

from __future__ import annotations

import pytest

from application.use_cases.associate_file import AssociateFile, AssociateFileCommand
from application.use_cases.create_upload import CreateUpload, CreateUploadCommand
from domain.errors import Invalid
from domain.files import safe_file_name
from domain.uploads import NOT_UPLOADED, UploadPolicy
from tests.fakes import FakeClock
from tests.unit.test_knowledge_base_use_cases import create

X = "5b0d0c8e-3f43-4a52-9d2b-0d8f6f1f9a11"
Y = "6c1e1d9f-4054-4b63-8e3c-1e9f7f2f0b22"
BIG = 100 * 1024 * 1024


def keys(file_id, name="a.txt", org="org_a"):
    return f"orgs/{org}/files/{file_id}/{name}", f"orgs/{org}/files/{file_id}/content.md"


def command(caller, file_id=X, **overrides):
    file_key, content_key = keys(file_id)
    fields = {
        "kb_id": 1,
        "file_id": file_id,
        "file_name": "a.txt",
        "file_key": file_key,
        "content_key": content_key,
        "content_type": "text/plain",
        "file_size": 11,
    }
    fields.update(overrides)
    return AssociateFileCommand.parse(caller=caller, **fields)


def store(world, key, data=b"hello world", content_type="text/plain"):
    world.storage.objects[key] = data
    world.storage.content_types[key] = content_type


def use_case(world, max_size=BIG):
    for file_id in (X, Y):
        world.uploads.issue("org_a", file_id, keys(file_id)[0])
    return AssociateFile(
        world.kbs, world.files, world.uploads, world.jobs, world.uow, world.storage, max_size
    )


def presigner(world):
    return CreateUpload(
        world.storage, world.uploads, world.uow, FakeClock(), UploadPolicy(max_size=1000)
    )


def field_of(error):
    return [d["field"] for d in error.value.details]


async def test_content_key_of_another_file_is_refused(world, caller):
    await create(world, caller)
    store(world, keys(X)[0])
    store(world, keys(Y)[0], b"Y's original")
    with pytest.raises(Invalid, match="contentKey is not the key issued") as error:
        await use_case(world).execute(command(caller, content_key=keys(Y)[0]))
    assert field_of(error) == ["contentKey"]
    assert world.files.rows == {} and world.jobs.jobs == []


@pytest.mark.parametrize(
    "file_key",
    [keys(Y)[0], keys(X, "b.txt")[0], keys(X, "content.md")[0], keys(X, "images")[0]],
)
async def test_a_file_key_not_issued_for_the_file_id_and_name_is_refused(world, caller, file_key):
    await create(world, caller)
    store(world, file_key)
    with pytest.raises(Invalid, match="fileKey is not the key issued") as error:
        await use_case(world).execute(command(caller, file_key=file_key))
    assert field_of(error) == ["fileKey"]


async def test_a_file_name_other_than_the_presigned_one_is_refused(world, caller):
    await create(world, caller)
    store(world, keys(X)[0])
    with pytest.raises(Invalid, match="fileKey is not the key issued"):
        await use_case(world).execute(command(caller, file_name="other.txt"))


async def test_nothing_uploaded_is_refused(world, caller):
    await create(world, caller)
    with pytest.raises(Invalid, match=NOT_UPLOADED) as error:
        await use_case(world).execute(command(caller))
    assert field_of(error) == ["fileKey"]


async def test_the_declared_size_must_be_the_uploaded_size(world, caller):
    await create(world, caller)
    store(world, keys(X)[0])
    with pytest.raises(Invalid, match=r"fileSize does not match .*11 bytes") as error:
        await use_case(world).execute(command(caller, file_size=99_000_000))
    assert field_of(error) == ["fileSize"]
    assert world.files.rows == {}


async def test_an_object_larger_than_the_limit_is_refused_even_undeclared(world, caller):
    await create(world, caller)
    store(world, keys(X)[0], b"x" * 20)
    with pytest.raises(Invalid, match="fileSize") as error:
        await use_case(world, max_size=10).execute(command(caller, file_size=None))
    assert field_of(error) == ["fileSize"]


async def test_an_undeclared_size_becomes_the_real_size(world, caller):
    await create(world, caller)
    store(world, keys(X)[0])
    record = await use_case(world).execute(command(caller, file_size=None))
    assert record.file_size == 11


async def test_the_declared_type_must_be_the_uploaded_type(world, caller):
    await create(world, caller)
    store(world, keys(X)[0], content_type="text/plain")
    with pytest.raises(Invalid, match="contentType does not match") as error:
        await use_case(world).execute(command(caller, content_type="application/pdf"))
    assert field_of(error) == ["contentType"]


async def test_type_parameters_and_case_do_not_matter(world, caller):
    await create(world, caller)
    store(world, keys(X)[0], content_type="text/plain; charset=utf-8")
    record = await use_case(world).execute(command(caller, content_type="Text/Plain"))
    assert record.content_type == "text/plain"


async def test_a_storage_that_knows_no_type_checks_the_size_only(world, caller):
    await create(world, caller)
    store(world, keys(X)[0])
    del world.storage.content_types[keys(X)[0]]
    record = await use_case(world).execute(command(caller, content_type="application/pdf"))
    assert record.content_type == "application/pdf"


async def test_an_upper_case_file_id_matches_the_issued_lower_case_keys(world, caller):
    await create(world, caller)
    store(world, keys(X)[0])
    file_key, content_key = keys(X)
    upper = command(caller, file_id=X.upper(), file_key=file_key, content_key=content_key)
    record = await use_case(world).execute(upper)
    assert record.file_id == X


@pytest.mark.parametrize(
    "name",
    [
        "a\x00.txt",
        "a\x1f.txt",
        "a.txt\x1f",
        "a\n.txt",
        "a.txt\t",
        "\u202etxt.exe",
        "a\u2066b.txt",
        "a\u200bb.txt",
        "a\u2028b.txt",
        "a\x7f.txt",
        "a\ud800.txt",
    ],
)
async def test_presign_refuses_control_and_bidi_characters_in_names(world, caller, name):
    presign = presigner(world)
    with pytest.raises(Invalid) as error:
        await presign.execute(
            CreateUploadCommand.parse(caller=caller, file_name=name, content_type="text/plain")
        )
    assert field_of(error) == ["fileName"]


async def test_presign_accepts_ordinary_unicode_names(world, caller):
    presign = presigner(world)
    prepared = await presign.execute(
        CreateUploadCommand.parse(
            caller=caller, file_name=" Ünïcode 報告.pdf ", content_type="a/b", file_size=1
        )
    )
    assert prepared.file_key.endswith("/Unicode_.pdf")


@pytest.mark.parametrize("name", ["content.md", "images", ".images", "images."])
def test_reserved_names_never_become_keys_of_their_own(name):
    assert safe_file_name(name) not in ("content.md", "images")
