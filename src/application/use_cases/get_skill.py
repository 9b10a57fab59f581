from __future__ import annotations

from dataclasses import dataclass

from application.ports.skill_repository import SkillRepository
from application.use_cases.create_skill import SkillView
from domain.errors import NotFound
from domain.identity import Caller
from domain.skills import SKILL_NOT_FOUND, Skill, parse_skill_id


@dataclass(frozen=True, slots=True, kw_only=True)
class GetSkillQuery:
    caller: Caller
    skill_id: int

    @classmethod
    def parse(cls, *, caller: Caller, skill_id: object) -> GetSkillQuery:
        """A well-formed skill id (400 "Valid skill ID is required")."""
        return cls(caller=caller, skill_id=parse_skill_id(skill_id))


async def active_skill(
    skills: SkillRepository, org_id: str, skill_id: int, *, lock: bool = False
) -> Skill:
    """The active skill `skill_id` of the organization: 404 "Skill not found" for a missing,
    foreign or deleted one."""
    skill = await skills.get(org_id, skill_id, lock=lock)
    if skill is None:
        raise NotFound(SKILL_NOT_FOUND)
    return skill


class GetSkill:
    """One active skill of the caller's organization with its SKILL.md and the list of its
    files (SKILL.md among them). Any member may read it; a deleted skill is 404."""

    def __init__(self, skills: SkillRepository) -> None:
        self._skills = skills

    async def execute(self, query: GetSkillQuery) -> SkillView:
        org_id = query.caller.org_id
        skill = await active_skill(self._skills, org_id, query.skill_id)
        files = await self._skills.list_files(org_id, skill.id)
        return SkillView(skill=skill, files=[skill.skill_md_file, *files])
