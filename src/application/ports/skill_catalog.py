from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillSummary:
    """What an agent is told about a skill before loading it."""

    id: int
    name: str
    description: str


class SkillCatalog(Protocol):
    """The skills an agent may load on demand (SKILL.md of each)."""

    async def describe(self, org_id: str, skill_ids: list[int]) -> list[SkillSummary]:
        """The active skills among `skill_ids`, in that order."""
        ...

    async def load(self, org_id: str, skill_id: int) -> str | None:
        """The skill's SKILL.md, or None when it is not an active skill of the organization."""
        ...
