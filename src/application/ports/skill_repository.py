from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from application.ports.skill_catalog import SkillSummary
from domain.skills import Skill, SkillFile, SkillManifest


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillDocument:
    """A SKILL.md as it is stored: the text as sent, its checked manifest and its SHA-256."""

    manifest: SkillManifest
    skill_md: str
    sha256: str


class SkillRepository(Protocol):
    """The skills of one organization and the records of their bundled files.

    Every method takes the organization id and never returns or touches a row of another
    organization. Only active skills are seen: a soft-deleted skill behaves exactly like a
    missing one (None, False, or refused), keeps its file records, and frees its name.
    Writes become durable when the unit of work commits.
    """

    async def add(self, org_id: str, user_id: str, document: SkillDocument) -> Skill:
        """Insert a skill at version 1; `Conflict` ("A skill with this name already exists")
        when an active skill of the organization has that name."""
        ...

    async def get(self, org_id: str, skill_id: int, *, lock: bool = False) -> Skill | None:
        """The active skill, or None. With `lock`, its row stays locked until the unit of work
        ends, so that concurrent changes of the skill (and its version) happen one at a time."""
        ...

    async def list_active(self, org_id: str) -> list[Skill]:
        """The organization's active skills, by name."""
        ...

    async def replace_document(self, org_id: str, skill_id: int, document: SkillDocument) -> Skill:
        """Replace the SKILL.md (and the manifest columns) of an active skill the caller holds
        locked and raise its version by one; `Conflict` on an active name clash."""
        ...

    async def soft_delete(self, org_id: str, skill_id: int) -> bool:
        """Mark the active skill deleted (it keeps its files); False when there is none."""
        ...

    async def list_files(self, org_id: str, skill_id: int) -> list[SkillFile]:
        """The skill's bundled files (SKILL.md not included), by path."""
        ...

    async def get_file(self, org_id: str, skill_id: int, path: str) -> SkillFile | None:
        """One bundled file's record, or None."""
        ...

    async def put_file(self, org_id: str, skill_id: int, file: SkillFile) -> SkillFile:
        """Insert or replace the record of the bundled file at `file.path` and raise the
        skill's version by one; the caller holds the skill locked."""
        ...

    async def add_files(self, org_id: str, skill_id: int, files: Sequence[SkillFile]) -> None:
        """Record the bundled files of a skill added in this same unit of work (an import),
        keeping its version at 1."""
        ...

    async def delete_file(self, org_id: str, skill_id: int, path: str) -> bool:
        """Remove a bundled file's record and raise the skill's version by one; False (and
        nothing changed) when there is none. The caller holds the skill locked."""
        ...

    async def summaries(self, org_id: str, skill_ids: list[int]) -> list[SkillSummary]:
        """Name and description of the active skills among `skill_ids`, in their order, each
        once; one read however many (an agent's chat lists them before every answer)."""
        ...

    async def missing(self, org_id: str, skill_ids: list[int]) -> list[int]:
        """Those of `skill_ids` that are not active skills of the organization, in order."""
        ...
