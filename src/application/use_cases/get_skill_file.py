from __future__ import annotations

from dataclasses import dataclass

from application.ports.object_storage import ObjectStorage
from application.ports.skill_repository import SkillRepository
from application.use_cases.get_skill import active_skill
from domain.errors import NotFound
from domain.identity import Caller
from domain.skills import (
    SKILL_FILE_NOT_FOUND,
    SkillFile,
    check_skill_path,
    is_skill_md,
    parse_skill_id,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class GetSkillFileQuery:
    caller: Caller
    skill_id: int
    path: str

    @classmethod
    def parse(cls, *, caller: Caller, skill_id: object, path: object) -> GetSkillFileQuery:
        """The path (the bundle's path rules, 400 "Invalid file path"), then the skill's id."""
        checked = check_skill_path(path)
        return cls(caller=caller, skill_id=parse_skill_id(skill_id), path=checked)


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillFileRead:
    """A file of a skill with its bytes."""

    file: SkillFile
    data: bytes


class GetSkillFile:
    """The bytes of one file of an active skill of the caller's organization, SKILL.md
    included. Any member may read them; a missing, foreign or deleted skill is 404 "Skill not
    found" and an unknown path 404 "File not found"."""

    def __init__(self, skills: SkillRepository, storage: ObjectStorage) -> None:
        self._skills = skills
        self._storage = storage

    async def execute(self, query: GetSkillFileQuery) -> SkillFileRead:
        org_id = query.caller.org_id
        path = query.path
        skill = await active_skill(self._skills, org_id, query.skill_id)
        if is_skill_md(path):
            return SkillFileRead(file=skill.skill_md_file, data=skill.skill_md.encode())
        record = await self._skills.get_file(org_id, skill.id, path)
        if record is None or record.storage_key is None:
            raise NotFound(SKILL_FILE_NOT_FOUND)
        data = await self._storage.get(record.storage_key)
        return SkillFileRead(file=record, data=data)
