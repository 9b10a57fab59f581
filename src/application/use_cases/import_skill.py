from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace

from application.ports.clock import Clock
from application.ports.object_storage import ObjectStorage
from application.ports.skill_bundle import FrontMatterParser, SkillBundleReader
from application.ports.skill_repository import SkillRepository
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.create_skill import SkillView, read_document
from domain.errors import Invalid, PayloadTooLarge, field_error
from domain.identity import Caller
from domain.skills import SkillFile, SkillLimits, check_folder_matches, skill_file_key

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportSkillCommand:
    caller: Caller
    archive: bytes


class ImportSkill:
    """Create a skill from a zip archive in the Agent Skills layout.

    Rules: any member may. SKILL.md sits at the archive's root or in its single top-level
    folder, whose name must then equal the skill's `name`; the other entries become bundled
    files at their relative paths. The reader refuses (400, nothing stored) an archive that is
    not a zip, has no SKILL.md, holds a path breaking the path rules, a symbolic link, an
    encrypted or duplicate entry, or more entries or bytes than the limits (counted while
    decompressing). SKILL.md follows the rules of creation; the name must be free (409). The
    files are stored before their records, and the skill (version 1) appears only when all
    are: a failure part-way removes the objects already written and records nothing.
    """

    def __init__(
        self,
        skills: SkillRepository,
        parser: FrontMatterParser,
        reader: SkillBundleReader,
        storage: ObjectStorage,
        uow: UnitOfWork,
        clock: Clock,
        limits: SkillLimits,
    ) -> None:
        self._skills = skills
        self._parser = parser
        self._reader = reader
        self._storage = storage
        self._uow = uow
        self._clock = clock
        self._limits = limits

    async def execute(self, command: ImportSkillCommand) -> SkillView:
        caller = command.caller
        if not command.archive:
            raise Invalid("A zip archive is required", [field_error("archive", "empty body")])
        if len(command.archive) > self._limits.max_total_bytes:
            raise PayloadTooLarge(f"A skill may hold at most {self._limits.max_total_bytes} bytes")
        bundle = await asyncio.to_thread(self._reader.read, command.archive)
        document = read_document(self._parser, bundle.skill_md)
        check_folder_matches(document.manifest, bundle.folder)
        skill = await self._skills.add(caller.org_id, caller.user_id, document)
        written: list[str] = []
        try:
            files = []
            for bundled in bundle.files:
                key = skill_file_key(caller.org_id, skill.id, bundled.path)
                await self._storage.put(key, bundled.content, content_type=bundled.content_type)
                written.append(key)
                files.append(
                    SkillFile.stored(
                        bundled.path,
                        bundled.content,
                        content_type=bundled.content_type,
                        storage_key=key,
                        at=self._clock.now(),
                    )
                )
            await self._skills.add_files(caller.org_id, skill.id, files)
            await self._uow.commit()
        except BaseException:
            await self._forget(written)
            raise
        skill = replace(skill, file_count=1 + len(files))
        return SkillView(skill=skill, files=[skill.skill_md_file, *files])

    async def _forget(self, keys: list[str]) -> None:
        for key in keys:
            try:
                await self._storage.delete(key)
            except Exception:  # the import's own failure is the one to report
                log.warning("could not remove an object of a failed skill import: %s", key)
