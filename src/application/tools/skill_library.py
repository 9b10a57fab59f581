from __future__ import annotations

from application.ports.object_storage import ObjectStorage
from application.ports.skill_catalog import LoadedSkill, SkillFileContent, SkillSummary
from application.ports.skill_repository import SkillRepository
from domain.errors import NotFound
from domain.identity import Caller
from domain.skills import SKILL_MD_TYPE, is_skill_md


class SkillLibrary:
    """The `SkillCatalog` of the skills feature: skills and their file records from the
    `SkillRepository` (which sees only the organization's active skills), bundled files' bytes
    from `ObjectStorage`. SKILL.md is read from the skill itself."""

    def __init__(self, skills: SkillRepository, storage: ObjectStorage) -> None:
        self._skills = skills
        self._storage = storage

    async def describe(self, caller: Caller, skill_ids: list[int]) -> list[SkillSummary]:
        if not skill_ids:
            return []
        return await self._skills.summaries(caller.org_id, skill_ids)

    async def load(self, caller: Caller, skill_id: int) -> LoadedSkill | None:
        skill = await self._skills.get(caller.org_id, skill_id)
        if skill is None:
            return None
        files = await self._skills.list_files(caller.org_id, skill_id)
        return LoadedSkill(
            id=skill.id,
            name=skill.manifest.name,
            skill_md=skill.skill_md,
            files=[f.path for f in files if not is_skill_md(f.path)],
        )

    async def read_file(
        self, caller: Caller, skill_id: int, path: str, *, max_bytes: int | None = None
    ) -> SkillFileContent | None:
        skill = await self._skills.get(caller.org_id, skill_id)
        if skill is None:
            return None
        if is_skill_md(path):
            data = skill.skill_md.encode()
            too_large = max_bytes is not None and len(data) > max_bytes
            return SkillFileContent(
                path=path,
                content_type=SKILL_MD_TYPE,
                size=len(data),
                content=None if too_large else data,
            )
        record = await self._skills.get_file(caller.org_id, skill_id, path)
        if record is None or record.storage_key is None:
            return None
        content: bytes | None = None
        if max_bytes is None or record.size <= max_bytes:
            try:
                content = await self._storage.get(record.storage_key)
            except NotFound:
                # A record whose object is gone is a file the agent cannot read.
                return None
        return SkillFileContent(
            path=record.path, content_type=record.content_type, size=record.size, content=content
        )
