from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from domain.errors import Invalid
from domain.identity import Caller
from domain.skills import split_front_matter


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillSummary:
    """What an agent is told about a skill before loading it."""

    id: int
    name: str
    description: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedSkill:
    """A skill as loaded by an agent: its SKILL.md as stored, and the paths of its bundled
    files (SKILL.md not included), by path."""

    id: int
    name: str
    skill_md: str
    files: list[str]

    @property
    def instructions(self) -> str:
        """SKILL.md's Markdown body, without the front matter the agent already knows from the
        listing (the whole text, trimmed, when it has no front matter)."""
        try:
            return split_front_matter(self.skill_md)[1].strip()
        except Invalid:
            return self.skill_md.strip()


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillFileContent:
    """One file of a skill as read by an agent: its path, content type and size in bytes, and
    its bytes, or None when they were not fetched because the file is larger than asked."""

    path: str
    content_type: str
    size: int
    content: bytes | None


class SkillCatalog(Protocol):
    """The skills an agent may use, seen by the member it answers.

    Only the active skills of the caller's organization exist here: a soft-deleted skill, one
    of another organization and an unknown id all look the same (left out, or None). Nothing
    is cached between calls, so a skill deleted during an answer is refused from then on.
    """

    async def describe(self, caller: Caller, skill_ids: list[int]) -> list[SkillSummary]:
        """The active skills among `skill_ids`, in that order, each once."""
        ...

    async def load(self, caller: Caller, skill_id: int) -> LoadedSkill | None:
        """The skill's SKILL.md and the paths of its bundled files, or None when it is not an
        active skill of the caller's organization."""
        ...

    async def read_file(
        self, caller: Caller, skill_id: int, path: str, *, max_bytes: int | None = None
    ) -> SkillFileContent | None:
        """The file at `path` in the skill's folder (`SKILL.md` included), or None when the
        skill is not an active skill of the caller's organization or has no such file. A file
        larger than `max_bytes` comes without its bytes (`content` None)."""
        ...
