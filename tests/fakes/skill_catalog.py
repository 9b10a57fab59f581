"""A fake `SkillCatalog` in memory, with the organization and soft-delete rules of the real one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from application.ports.skill_catalog import LoadedSkill, SkillFileContent, SkillSummary
from domain.identity import Caller
from domain.skills import SKILL_MD_TYPE, is_skill_md

if TYPE_CHECKING:
    from application.ports.skill_catalog import SkillCatalog


@dataclass(slots=True, kw_only=True)
class FakeSkill:
    """A skill of the fake catalog; `files` maps a bundled file's path to its content type and
    bytes. A deleted skill, or one of another organization, is invisible to a caller."""

    id: int
    name: str
    description: str
    body: str = ""
    org_id: str = "org_a"
    deleted: bool = False
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)

    @property
    def skill_md(self) -> str:
        return f"---\nname: {self.name}\ndescription: {self.description}\n---\n{self.body}"


class FakeSkillCatalog:
    """Records each call (`calls`: method name and skill id(s)) and the `max_bytes` asked."""

    def __init__(self, *skills: FakeSkill) -> None:
        self.skills = {s.id: s for s in skills}
        self.calls: list[tuple[str, object]] = []

    def _active(self, caller: Caller, skill_id: int) -> FakeSkill | None:
        skill = self.skills.get(skill_id)
        if skill is None or skill.deleted or skill.org_id != caller.org_id:
            return None
        return skill

    async def describe(self, caller: Caller, skill_ids: list[int]) -> list[SkillSummary]:
        self.calls.append(("describe", list(skill_ids)))
        found = (self._active(caller, i) for i in dict.fromkeys(skill_ids))
        return [SkillSummary(id=s.id, name=s.name, description=s.description) for s in found if s]

    async def load(self, caller: Caller, skill_id: int) -> LoadedSkill | None:
        self.calls.append(("load", skill_id))
        skill = self._active(caller, skill_id)
        if skill is None:
            return None
        return LoadedSkill(
            id=skill.id, name=skill.name, skill_md=skill.skill_md, files=sorted(skill.files)
        )

    async def read_file(
        self, caller: Caller, skill_id: int, path: str, *, max_bytes: int | None = None
    ) -> SkillFileContent | None:
        self.calls.append(("read_file", (skill_id, path, max_bytes)))
        skill = self._active(caller, skill_id)
        if skill is None:
            return None
        if is_skill_md(path):
            content_type, data = SKILL_MD_TYPE, skill.skill_md.encode()
        elif path in skill.files:
            content_type, data = skill.files[path]
        else:
            return None
        too_large = max_bytes is not None and len(data) > max_bytes
        return SkillFileContent(
            path=path,
            content_type=content_type,
            size=len(data),
            content=None if too_large else data,
        )


if TYPE_CHECKING:  # mypy checks the fake against the port it stands in for
    _skill_catalog: SkillCatalog = FakeSkillCatalog()
