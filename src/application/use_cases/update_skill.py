from __future__ import annotations

from dataclasses import dataclass

from application.ports.skill_bundle import FrontMatterParser
from application.ports.skill_repository import SkillRepository
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.create_skill import SkillView, read_document
from application.use_cases.get_skill import active_skill
from domain.errors import Conflict
from domain.identity import Caller
from domain.skills import SKILL_CHANGED, parse_expected_version, parse_skill_id, parse_skill_md


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateSkillCommand:
    caller: Caller
    skill_id: int
    skill_md: str
    expected_version: int | None = None

    @classmethod
    def parse(
        cls, *, caller: Caller, skill_id: object, skill_md: object, expected_version: object = None
    ) -> UpdateSkillCommand:
        """The skill's id (400 "Valid skill ID is required"), SKILL.md (`parse_skill_md`), and
        the version expected, absent or a positive integer (400)."""
        return cls(
            caller=caller,
            skill_id=parse_skill_id(skill_id),
            skill_md=parse_skill_md(skill_md),
            expected_version=parse_expected_version(expected_version),
        )


class UpdateSkill:
    """Replace the SKILL.md of an active skill of the caller's organization.

    Rules: any member may. The skill id names an active skill (404 "Skill not found"). SKILL.md
    follows the same rules as on creation (its front matter is read here); a changed name must
    stay unique among active skills (409). With `expectedVersion`, the write happens only
    if the skill is still at that version (409 "Skill was changed by someone else" and nothing
    changes otherwise); the skill is locked while it is checked and written, so two writers
    that both expect version N cannot both succeed. A SKILL.md identical to the stored one is
    no change and keeps the version; any other raises it by one.
    """

    def __init__(self, skills: SkillRepository, parser: FrontMatterParser, uow: UnitOfWork) -> None:
        self._skills = skills
        self._parser = parser
        self._uow = uow

    async def execute(self, command: UpdateSkillCommand) -> SkillView:
        org_id = command.caller.org_id
        expected = command.expected_version
        document = read_document(self._parser, command.skill_md)
        skill = await active_skill(self._skills, org_id, command.skill_id, lock=True)
        if expected is not None and expected != skill.version:
            raise Conflict(SKILL_CHANGED)
        if document.skill_md != skill.skill_md:
            skill = await self._skills.replace_document(org_id, skill.id, document)
            await self._uow.commit()
        files = await self._skills.list_files(org_id, skill.id)
        return SkillView(skill=skill, files=[skill.skill_md_file, *files])
