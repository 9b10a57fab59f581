from __future__ import annotations

from dataclasses import dataclass

from application.ports.object_storage import ObjectStorage
from application.ports.skill_repository import SkillRepository
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.get_skill import active_skill
from domain.errors import NotFound
from domain.identity import Caller
from domain.skills import SKILL_FILE_NOT_FOUND, bundled_file_path, parse_skill_id


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteSkillFileCommand:
    caller: Caller
    skill_id: int
    path: str

    @classmethod
    def parse(cls, *, caller: Caller, skill_id: object, path: object) -> DeleteSkillFileCommand:
        """The path of a bundled file (`bundled_file_path`: SKILL.md is refused), then the
        skill's id."""
        checked = bundled_file_path(path)
        return cls(caller=caller, skill_id=parse_skill_id(skill_id), path=checked)


class SkillFileNotDeleted(Exception):
    """The stored object could not be deleted (whatever the store's failure, an outage
    included); the record is kept and the request answers 500, as CONTRACT.md says."""


class DeleteSkillFile:
    """Delete a bundled file of an active skill of the caller's organization (agent-platform-api.md
    §4.6), from storage and from the database.

    Rules: any member may. The skill id names an active skill (404 otherwise); an unknown path
    is 404 "File not found". The object is deleted first, the record in the same
    transaction after it: a storage failure answers 500 and keeps the record, and a retry
    deletes what is left (deleting a missing object is no error), so neither ever outlives the
    other for good. The skill's version rises by one.
    """

    def __init__(self, skills: SkillRepository, storage: ObjectStorage, uow: UnitOfWork) -> None:
        self._skills = skills
        self._storage = storage
        self._uow = uow

    async def execute(self, command: DeleteSkillFileCommand) -> None:
        org_id = command.caller.org_id
        path = command.path
        skill = await active_skill(self._skills, org_id, command.skill_id, lock=True)
        record = await self._skills.get_file(org_id, skill.id, path)
        if record is None:
            raise NotFound(SKILL_FILE_NOT_FOUND)
        if record.storage_key is not None:
            try:
                await self._storage.delete(record.storage_key)
            except Exception as error:
                raise SkillFileNotDeleted(record.storage_key) from error
        await self._skills.delete_file(org_id, skill.id, path)
        await self._uow.commit()
