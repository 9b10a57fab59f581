from __future__ import annotations

import hashlib
from dataclasses import dataclass

from application.ports.skill_bundle import FrontMatterParser
from application.ports.skill_repository import SkillDocument, SkillRepository
from application.ports.unit_of_work import UnitOfWork
from domain.errors import Invalid, field_error
from domain.identity import Caller
from domain.skills import Skill, SkillFile

MAX_SKILL_MD_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillView:
    """A skill with every file it holds: SKILL.md first, then its bundled files by path."""

    skill: Skill
    files: list[SkillFile]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateSkillCommand:
    caller: Caller
    skill_md: object


def read_document(parser: FrontMatterParser, skill_md: object) -> SkillDocument:
    """SKILL.md checked as the Agent Skills format wants it (400 naming the field otherwise):
    a non-empty string of at most 256 KiB whose front matter parses and follows the rules."""
    if not isinstance(skill_md, str) or not skill_md.strip():
        raise Invalid("skillMd is required", [field_error("skillMd", "a non-empty string")])
    data = skill_md.encode("utf-8", "surrogatepass")
    if len(data) > MAX_SKILL_MD_BYTES:
        raise Invalid(
            f"SKILL.md may be at most {MAX_SKILL_MD_BYTES // 1024} KiB",
            [field_error("skillMd", f"at most {MAX_SKILL_MD_BYTES} bytes")],
        )
    manifest = parser.parse(skill_md)
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
