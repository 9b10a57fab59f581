from __future__ import annotations

from dataclasses import dataclass

from application.ports.clock import Clock
from application.ports.object_storage import ObjectStorage
from application.ports.skill_repository import SkillRepository
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.get_skill import active_skill
from domain.errors import Invalid, PayloadTooLarge, field_error
from domain.identity import Caller
from domain.skills import (
    INVALID_PATH,
    SkillFile,
    SkillLimits,
    bundled_file_path,
    file_content_type,
    parse_file_content,
    parse_skill_id,
    skill_file_key,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PutSkillFileCommand:
    caller: Caller
    skill_id: int
    path: str
    content: bytes
    content_type: str

    @classmethod
    def parse(
        cls,
        *,
        caller: Caller,
        skill_id: object,
        path: object,
        content: object,
        content_type: object = None,
    ) -> PutSkillFileCommand:
        """The path of a bundled file (`bundled_file_path`), its bytes in base64, its content
        type (guessed from the name when absent), then the skill's id."""
        checked = bundled_file_path(path)
        data = parse_file_content(content)
        kind = file_content_type(content_type, checked)
        return cls(
            caller=caller,
            skill_id=parse_skill_id(skill_id),
            path=checked,
            content=data,
            content_type=kind,
        )


class PutSkillFile:
    """Add a bundled file to an active skill of the caller's organization, or replace one.

    Rules: any member may. The skill id names an active skill (404 otherwise). The bytes are at
    most the per-file limit (413), and the skill stays within its limits of files and bytes in
    all (413); a file and a folder of the skill may not share a name (400). The skill's version
    rises by one unless the same bytes and type were already there.

    The bytes go to a new key of their own (the skill's new version's folder, under the
    organization's prefix) before the record is switched to it in the transaction, so a record
    never names bytes that are not stored and a replacement never touches the bytes the
    committed record names: when the write of the record or its commit fails, the new object is
    deleted and the old record still reads the old bytes; once committed, the replaced object is
    deleted (one left behind by a storage failure is named by no record).
    """

    def __init__(
        self,
        skills: SkillRepository,
        storage: ObjectStorage,
        uow: UnitOfWork,
        clock: Clock,
        limits: SkillLimits,
    ) -> None:
        self._skills = skills
        self._storage = storage
        self._uow = uow
        self._clock = clock
        self._limits = limits

    async def execute(self, command: PutSkillFileCommand) -> SkillFile:
        org_id = command.caller.org_id
        path, data, content_type = command.path, command.content, command.content_type
        limits = self._limits
        if len(data) > limits.max_file_bytes:
            raise PayloadTooLarge(f"A skill file may be at most {limits.max_file_bytes} bytes")
        skill = await active_skill(self._skills, org_id, command.skill_id, lock=True)
        files = {f.path: f for f in await self._skills.list_files(org_id, skill.id)}
        key = skill_file_key(org_id, skill.id, path, version=skill.version + 1)
        new = SkillFile.stored(
            path, data, content_type=content_type, storage_key=key, at=self._clock.now()
        )
        if any(p.startswith(f"{path}/") or path.startswith(f"{p}/") for p in files):
            raise Invalid(
                INVALID_PATH,
                [field_error("path", "a file and a folder of the skill would share this name")],
            )
        current = files.pop(path, None)
        if current is not None and (current.sha256, current.content_type) == (
            new.sha256,
            new.content_type,
        ):
            return current
        if len(files) + 2 > limits.max_files:
            raise PayloadTooLarge(f"A skill may hold at most {limits.max_files} files")
        total = len(skill.skill_md.encode()) + sum(f.size for f in files.values()) + len(data)
        if total > limits.max_total_bytes:
            raise PayloadTooLarge(f"A skill may hold at most {limits.max_total_bytes} bytes")
        await self._storage.put(key, data, content_type=content_type)
        try:
            record = await self._skills.put_file(org_id, skill.id, new)
            await self._uow.commit()
        except Exception:
            await _discard(self._storage, key)
            raise
        replaced = current.storage_key if current is not None else None
        if replaced is not None and replaced != key:
            await _discard(self._storage, replaced)
        return record


async def _discard(storage: ObjectStorage, key: str) -> None:
    """Delete an object no committed record names; a failure leaves it behind (unnamed,
    harmless) rather than failing a request whose outcome is already decided."""
    try:
        await storage.delete(key)
    except Exception:
        return
