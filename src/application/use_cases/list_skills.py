from __future__ import annotations

from dataclasses import dataclass

from application.ports.skill_repository import SkillRepository
from domain.identity import Caller
from domain.skills import Skill


@dataclass(frozen=True, slots=True, kw_only=True)
class ListSkillsQuery:
    caller: Caller


class ListSkills:
    """The organization's active skills, by name. Any member may list them; soft-deleted
    skills are left out."""

    def __init__(self, skills: SkillRepository) -> None:
        self._skills = skills

    async def execute(self, query: ListSkillsQuery) -> list[Skill]:
        return await self._skills.list_active(query.caller.org_id)
