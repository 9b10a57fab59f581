from __future__ import annotations

import hashlib
from dataclasses import dataclass

from application.ports.skill_bundle import FrontMatterParser
from application.ports.skill_repository import SkillDocument, SkillRepository
from application.ports.unit_of_work import UnitOfWork
from domain.identity import Caller
from domain.skills import Skill, SkillFile, parse_skill_md


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillView:
    """A skill with every file it holds: SKILL.md first, then its bundled files by path."""

    skill: Skill
    files: list[SkillFile]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateSkillCommand:
    caller: Caller
    skill_md: str

    @classmethod
    def parse(cls, *, caller: Caller, skill_md: object) -> CreateSkillCommand:
        """SKILL.md, a non-empty string of at most 256 KiB (`parse_skill_md`)."""
        return cls(caller=caller, skill_md=parse_skill_md(skill_md))


def read_document(parser: FrontMatterParser, skill_md: str) -> SkillDocument:
    """SKILL.md (as `parse_skill_md` accepts it) whose front matter parses and follows the
    Agent Skills format (400 naming the field otherwise), with its digest."""
    manifest = parser.parse(skill_md)
    data = skill_md.encode("utf-8", "surrogatepass")
    return SkillDocument(
        manifest=manifest, skill_md=skill_md, sha256=hashlib.sha256(data).hexdigest()
    )


class CreateSkill:
    """Add a skill to the caller's organization from its SKILL.md.

    Rules: any member may. SKILL.md is a non-empty string of at most 256 KiB with YAML front
    matter following the Agent Skills format (400 naming the field otherwise); it is stored
    byte for byte as sent. The name is unique among the organization's active skills (409 "A
    skill with this name already exists"). The skill starts at version 1 with SKILL.md as its
    only file.
    """

    def __init__(self, skills: SkillRepository, parser: FrontMatterParser, uow: UnitOfWork) -> None:
        self._skills = skills
        self._parser = parser
        self._uow = uow

    async def execute(self, command: CreateSkillCommand) -> SkillView:
        caller = command.caller
        document = read_document(self._parser, command.skill_md)
        skill = await self._skills.add(caller.org_id, caller.user_id, document)
        await self._uow.commit()
        return SkillView(skill=skill, files=[skill.skill_md_file])
