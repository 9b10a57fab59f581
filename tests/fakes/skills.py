"""A fake `SkillRepository` in memory, with the organization scoping, name uniqueness among
active skills, versions and soft deletion of the real one."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from application.ports.skill_catalog import SkillSummary
from application.ports.skill_repository import SkillDocument
from domain.errors import Conflict, NotFound
from domain.skills import SKILL_NAME_TAKEN, SKILL_NOT_FOUND, Skill, SkillFile, skill_file_key

if TYPE_CHECKING:
    from application.ports.skill_repository import SkillRepository
    from tests.fakes.basics import Restorable

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

SkillsState = tuple[dict[int, Skill], set[int], dict[tuple[int, str], SkillFile], int, int]


class FakeSkillRepository:
    """Skills as `Skill` values (file_count refreshed on read), soft-deleted ids apart, and file
    records by (skill id, path)."""

    def __init__(self) -> None:
        self.rows: dict[int, Skill] = {}
        self.deleted: set[int] = set()
        self.files: dict[tuple[int, str], SkillFile] = {}
        self._next = 1
        self._clock = 0

    def snapshot(self) -> SkillsState:
        return copy.deepcopy((self.rows, self.deleted, self.files, self._next, self._clock))

    def restore(self, saved: SkillsState) -> None:
        self.rows, self.deleted, self.files, self._next, self._clock = copy.deepcopy(saved)

    def _tick(self) -> datetime:
        self._clock += 1
        return EPOCH + timedelta(seconds=self._clock)

    def _active(self, org_id: str, skill_id: int) -> Skill | None:
        skill = self.rows.get(skill_id)
        if skill is None or skill.org_id != org_id or skill_id in self.deleted:
            return None
        return skill

    def _read(self, skill: Skill) -> Skill:
        count = sum(1 for skill_id, _ in self.files if skill_id == skill.id)
        return dataclasses.replace(skill, file_count=count + 1)

    def _check_name(self, org_id: str, name: str, skill_id: int | None = None) -> None:
        for other in self.rows.values():
            if (
                other.org_id == org_id
                and other.manifest.name == name
                and other.id != skill_id
                and other.id not in self.deleted
            ):
                raise Conflict(SKILL_NAME_TAKEN)

    def _bump(self, skill: Skill, document: SkillDocument | None = None) -> Skill:
        now = self._tick()
        bumped = dataclasses.replace(skill, version=skill.version + 1, updated_at=now)
        if document is not None:
            bumped = dataclasses.replace(
                bumped,
                manifest=document.manifest,
                skill_md=document.skill_md,
                skill_md_sha256=document.sha256,
                skill_md_updated_at=now,
            )
        self.rows[skill.id] = bumped
        return bumped

    async def add(self, org_id: str, user_id: str, document: SkillDocument) -> Skill:
        self._check_name(org_id, document.manifest.name)
        now = self._tick()
        skill = Skill(
            id=self._next, org_id=org_id, user_id=user_id, manifest=document.manifest,
            skill_md=document.skill_md, skill_md_sha256=document.sha256, skill_md_updated_at=now,
            version=1, file_count=1, created_at=now, updated_at=now,
        )  # fmt: skip
        self.rows[skill.id] = skill
        self._next += 1
        return self._read(skill)

    async def get(self, org_id: str, skill_id: int, *, lock: bool = False) -> Skill | None:
        skill = self._active(org_id, skill_id)
        return self._read(skill) if skill else None

    async def list_active(self, org_id: str) -> list[Skill]:
        skills = [s for s in self.rows.values() if self._active(org_id, s.id)]
        return [self._read(s) for s in sorted(skills, key=lambda s: (s.manifest.name, s.id))]

    async def replace_document(self, org_id: str, skill_id: int, document: SkillDocument) -> Skill:
        skill = self._active(org_id, skill_id)
        if skill is None:
            raise NotFound(SKILL_NOT_FOUND)
        self._check_name(org_id, document.manifest.name, skill_id)
        bumped = self._bump(skill, document)
        return self._read(bumped)

    async def soft_delete(self, org_id: str, skill_id: int) -> bool:
        if self._active(org_id, skill_id) is None:
            return False
        self.deleted.add(skill_id)
        return True

    async def list_files(self, org_id: str, skill_id: int) -> list[SkillFile]:
        if self._active(org_id, skill_id) is None:
            return []
        files = [f for (owner, _), f in self.files.items() if owner == skill_id]
        return sorted(files, key=lambda f: f.path)

    async def get_file(self, org_id: str, skill_id: int, path: str) -> SkillFile | None:
        if self._active(org_id, skill_id) is None:
            return None
        return self.files.get((skill_id, path))

    async def put_file(self, org_id: str, skill_id: int, file: SkillFile) -> SkillFile:
        skill = self._active(org_id, skill_id)
        if skill is None:
            raise NotFound(SKILL_NOT_FOUND)
        bumped = self._bump(skill)
        stored = dataclasses.replace(
            file,
            updated_at=bumped.updated_at,
            storage_key=file.storage_key or skill_file_key(org_id, skill_id, file.path),
        )
        self.files[(skill_id, file.path)] = stored
        return stored

    async def add_files(self, org_id: str, skill_id: int, files: Sequence[SkillFile]) -> None:
        if not files:
            return
        if self._active(org_id, skill_id) is None:
            raise NotFound(SKILL_NOT_FOUND)
        for file in files:
            key = file.storage_key or skill_file_key(org_id, skill_id, file.path)
            self.files[(skill_id, file.path)] = dataclasses.replace(file, storage_key=key)

    async def delete_file(self, org_id: str, skill_id: int, path: str) -> bool:
        skill = self._active(org_id, skill_id)
        if skill is None or (skill_id, path) not in self.files:
            return False
        del self.files[(skill_id, path)]
        self._bump(skill)
        return True

    async def missing(self, org_id: str, skill_ids: list[int]) -> list[int]:
        return [i for i in skill_ids if self._active(org_id, i) is None]

    async def summaries(self, org_id: str, skill_ids: list[int]) -> list[SkillSummary]:
        found: list[SkillSummary] = []
        for skill_id in dict.fromkeys(skill_ids):
            skill = self._active(org_id, skill_id)
            if skill is not None:
                found.append(
                    SkillSummary(
                        id=skill.id,
                        name=skill.manifest.name,
                        description=skill.manifest.description,
                    )
                )
        return found


if TYPE_CHECKING:  # mypy checks the fake against the port it stands in for
    _skills: SkillRepository = FakeSkillRepository()
    _skills_store: Restorable[SkillsState] = FakeSkillRepository()
