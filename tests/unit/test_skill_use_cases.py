"""Skill use cases with fakes: versions, optimistic concurrency, and storage failures that
leave records and objects consistent (or finishable by a retry)."""

from __future__ import annotations

import base64
import io
import zipfile
from dataclasses import dataclass, field

import pytest

from adapters.skills.front_matter import YamlFrontMatterParser
from adapters.skills.zip_bundle import ZipSkillBundleReader
from application.use_cases.create_skill import CreateSkill, CreateSkillCommand
from application.use_cases.delete_skill_file import (
    DeleteSkillFile,
    DeleteSkillFileCommand,
    SkillFileNotDeleted,
)
from application.use_cases.get_skill_file import GetSkillFile, GetSkillFileQuery
from application.use_cases.import_skill import ImportSkill, ImportSkillCommand
from application.use_cases.put_skill_file import PutSkillFile, PutSkillFileCommand
from application.use_cases.soft_delete_skill import SoftDeleteSkill, SoftDeleteSkillCommand
from application.use_cases.update_skill import UpdateSkill, UpdateSkillCommand
from domain.errors import Conflict, Invalid, NotFound, PayloadTooLarge
from domain.identity import Caller
from domain.skills import SkillFile, SkillLimits, skill_file_key
from tests.fakes import FakeUnitOfWork
from tests.fakes.basics import FakeClock, FakeStorage
from tests.fakes.members import FakeAuditLog
from tests.fakes.skills import FakeSkillRepository

ALICE = Caller(user_id="user_alice", org_id="org_a")
BOB = Caller(user_id="user_bob", org_id="org_b")
LIMITS = SkillLimits(max_files=4, max_file_bytes=64, max_total_bytes=1024)


def skill_md(name: str = "pdf-tools", description: str = "Reads PDFs.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\nUse it.\n"


@dataclass
class World:
    skills: FakeSkillRepository = field(default_factory=FakeSkillRepository)
    storage: FakeStorage = field(default_factory=FakeStorage)
    clock: FakeClock = field(default_factory=FakeClock)
    parser: YamlFrontMatterParser = field(default_factory=YamlFrontMatterParser)

    def __post_init__(self) -> None:
        self.uow = FakeUnitOfWork(self.skills)

    async def create(self, md: str | None = None, caller: Caller = ALICE) -> int:
        view = await CreateSkill(self.skills, self.parser, self.uow).execute(
            CreateSkillCommand.parse(caller=caller, skill_md=md or skill_md())
        )
        return view.skill.id

    def put(self) -> PutSkillFile:
        return PutSkillFile(self.skills, self.storage, self.uow, self.clock, LIMITS)

    async def add_file(self, skill_id: int, path: str, data: bytes) -> None:
        await self.put().execute(
            PutSkillFileCommand.parse(
                caller=ALICE,
                skill_id=skill_id,
                path=path,
                content=base64.b64encode(data).decode(),
            )
        )

    def importer(self) -> ImportSkill:
        reader = ZipSkillBundleReader(max_entries=4, max_entry_bytes=64, max_total_bytes=1024)
        return ImportSkill(
            self.skills, self.parser, reader, self.storage, self.uow, self.clock, LIMITS
        )


@pytest.fixture
def w() -> World:
    return World()


async def test_versions_count_changes_only(w):
    sid = await w.create()
    update = UpdateSkill(w.skills, w.parser, w.uow)
    view = await update.execute(
        UpdateSkillCommand.parse(caller=ALICE, skill_id=sid, skill_md=skill_md(description="New."))
    )
    assert view.skill.version == 2
    same = await update.execute(
        UpdateSkillCommand.parse(caller=ALICE, skill_id=sid, skill_md=skill_md(description="New."))
    )
    assert same.skill.version == 2
    await w.add_file(sid, "a.txt", b"one")
    await w.add_file(sid, "a.txt", b"one")
    assert (await w.skills.get("org_a", sid)).version == 3


async def test_a_stale_expected_version_changes_nothing(w):
    sid = await w.create()
    update = UpdateSkill(w.skills, w.parser, w.uow)
    commits = w.uow.commits
    with pytest.raises(Conflict, match="Skill was changed by someone else"):
        await update.execute(
            UpdateSkillCommand.parse(
                caller=ALICE, skill_id=sid, skill_md=skill_md(description="X."), expected_version=2
            )
        )
    skill = await w.skills.get("org_a", sid)
    assert skill.manifest.description == "Reads PDFs." and w.uow.commits == commits
    for bad in (0, -1, True, "1", 1.0):
        with pytest.raises(Invalid, match="expectedVersion must be a positive integer"):
            await update.execute(
                UpdateSkillCommand.parse(
                    caller=ALICE, skill_id=sid, skill_md=skill_md(), expected_version=bad
                )
            )


async def test_a_failed_storage_delete_keeps_the_record_and_a_retry_finishes(w):
    sid = await w.create()
    await w.add_file(sid, "scripts/run.sh", b"echo hi")
    delete = DeleteSkillFile(w.skills, w.storage, w.uow)
    command = DeleteSkillFileCommand.parse(caller=ALICE, skill_id=sid, path="scripts/run.sh")
    w.storage.failing_prefixes.add(f"orgs/org_a/skills/{sid}/")
    commits = w.uow.commits
    with pytest.raises(SkillFileNotDeleted) as failed:
        await delete.execute(command)
    assert isinstance(failed.value.__cause__, OSError)
    assert w.uow.commits == commits
    assert await w.skills.get_file("org_a", sid, "scripts/run.sh") is not None
    w.storage.failing_prefixes.clear()
    await delete.execute(command)
    assert await w.skills.get_file("org_a", sid, "scripts/run.sh") is None
    assert w.storage.objects == {}


async def test_a_record_whose_object_is_already_gone_is_still_deleted(w):
    sid = await w.create()
    await w.add_file(sid, "a.txt", b"x")
    w.storage.objects.clear()
    await DeleteSkillFile(w.skills, w.storage, w.uow).execute(
        DeleteSkillFileCommand.parse(caller=ALICE, skill_id=sid, path="a.txt")
    )
    assert await w.skills.get_file("org_a", sid, "a.txt") is None


class CommitFails(FakeUnitOfWork):
    """A unit of work whose commit fails (the database rolls the transaction back)."""

    async def commit(self) -> None:
        await self.rollback()
        raise ConnectionError("the commit failed")


async def read_file(w: World, skill_id: int, path: str) -> bytes:
    read = await GetSkillFile(w.skills, w.storage).execute(
        GetSkillFileQuery.parse(caller=ALICE, skill_id=skill_id, path=path)
    )
    return read.data


async def test_a_replacement_goes_to_a_new_key_and_the_old_object_goes_after_the_commit(w):
    sid = await w.create()
    await w.add_file(sid, "a.txt", b"one")
    first = await w.skills.get_file("org_a", sid, "a.txt")
    await w.add_file(sid, "a.txt", b"two")
    second = await w.skills.get_file("org_a", sid, "a.txt")
    assert first.storage_key != second.storage_key
    assert w.storage.objects == {second.storage_key: b"two"}
    assert await read_file(w, sid, "a.txt") == b"two"


async def test_a_replacement_whose_commit_fails_keeps_the_old_bytes_and_leaves_no_object(w):
    sid = await w.create()
    await w.add_file(sid, "a.txt", b"one")
    before = dict(w.storage.objects)
    failing = CommitFails(w.skills)
    with pytest.raises(ConnectionError):
        await PutSkillFile(w.skills, w.storage, failing, w.clock, LIMITS).execute(
            PutSkillFileCommand.parse(
                caller=ALICE, skill_id=sid, path="a.txt", content=base64.b64encode(b"two").decode()
            )
        )
    assert w.storage.objects == before
    assert await read_file(w, sid, "a.txt") == b"one"


async def test_a_file_stored_at_the_unversioned_key_is_read_and_replaced(w):
    sid = await w.create()
    legacy = skill_file_key("org_a", sid, "a.txt")
    w.skills.files[(sid, "a.txt")] = SkillFile.stored(
        "a.txt", b"old", content_type="text/plain", storage_key=legacy, at=w.clock.now()
    )
    w.storage.objects[legacy] = b"old"
    assert await read_file(w, sid, "a.txt") == b"old"
    await w.add_file(sid, "a.txt", b"new")
    assert legacy not in w.storage.objects and await read_file(w, sid, "a.txt") == b"new"


async def test_file_limits(w):
    sid = await w.create()
    with pytest.raises(PayloadTooLarge):
        await w.add_file(sid, "big.bin", b"x" * 65)
    for n in range(3):
        await w.add_file(sid, f"f{n}.txt", b"x")
    with pytest.raises(PayloadTooLarge, match="at most 4 files"):
        await w.add_file(sid, "f3.txt", b"x")
    await w.add_file(sid, "f0.txt", b"replaced")  # a replacement adds no file
    with pytest.raises(Invalid, match="content must be base64"):
        await w.put().execute(
            PutSkillFileCommand.parse(caller=ALICE, skill_id=sid, path="a.txt", content="@@@")
        )


async def test_skill_md_is_read_but_never_written_as_a_file(w):
    sid = await w.create()
    found = await GetSkillFile(w.skills, w.storage).execute(
        GetSkillFileQuery.parse(caller=ALICE, skill_id=sid, path="SKILL.md")
    )
    assert found.data == skill_md().encode() and found.file.content_type == "text/markdown"
    with pytest.raises(Invalid, match=r"SKILL\.md cannot be changed here"):
        await w.add_file(sid, "SKILL.md", b"---")
    with pytest.raises(Invalid, match=r"SKILL\.md cannot be changed here"):
        await DeleteSkillFile(w.skills, w.storage, w.uow).execute(
            DeleteSkillFileCommand.parse(caller=ALICE, skill_id=sid, path="SKILL.md")
        )


async def test_soft_deleted_and_foreign_skills_are_not_found(w):
    sid = await w.create()
    theirs = await w.create(caller=BOB)
    await w.add_file(sid, "a.txt", b"x")
    delete = SoftDeleteSkill(w.skills, FakeAuditLog(), w.uow)
    with pytest.raises(NotFound, match="Skill not found"):
        await delete.execute(SoftDeleteSkillCommand.parse(caller=ALICE, skill_id=theirs))
    await delete.execute(SoftDeleteSkillCommand.parse(caller=ALICE, skill_id=sid))
    with pytest.raises(NotFound, match="Skill not found"):
        await delete.execute(SoftDeleteSkillCommand.parse(caller=ALICE, skill_id=sid))
    with pytest.raises(NotFound, match="Skill not found"):
        await w.add_file(sid, "b.txt", b"x")
    assert list(w.storage.objects) == [skill_file_key("org_a", sid, "a.txt", version=2)]
    with pytest.raises(Invalid, match="Valid skill ID is required"):
        await delete.execute(SoftDeleteSkillCommand.parse(caller=ALICE, skill_id="x"))


def a_zip(entries: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


async def test_import_creates_version_one_with_its_files(w):
    view = await w.importer().execute(
        ImportSkillCommand(
            caller=ALICE,
            archive=a_zip({"pdf-tools/SKILL.md": skill_md(), "pdf-tools/ref/a.md": "# A"}),
        )
    )
    assert (view.skill.version, view.skill.file_count) == (1, 2)
    assert [f.path for f in view.files] == ["SKILL.md", "ref/a.md"]
    assert w.storage.objects == {f"orgs/org_a/skills/{view.skill.id}/files/ref/a.md": b"# A"}


async def test_an_import_that_fails_part_way_leaves_no_object_and_commits_nothing(w):
    archive = a_zip({"SKILL.md": skill_md(), "a.md": "A", "b/c.md": "C"})
    w.storage.failing_prefixes.add("orgs/org_a/skills/1/files/b/")
    with pytest.raises(OSError):
        await w.importer().execute(ImportSkillCommand(caller=ALICE, archive=archive))
    assert w.storage.objects == {} and w.uow.commits == 0
    with pytest.raises(Invalid, match="name"):
        await w.importer().execute(
            ImportSkillCommand(caller=ALICE, archive=a_zip({"other/SKILL.md": skill_md()}))
        )


async def test_a_file_and_a_folder_cannot_share_a_name(w):
    sid = await w.create()
    await w.add_file(sid, "docs/a.md", b"x")
    with pytest.raises(Invalid, match="Invalid file path"):
        await w.add_file(sid, "docs", b"x")
    with pytest.raises(Invalid, match="Invalid file path"):
        await w.add_file(sid, "docs/a.md/b.md", b"x")
