"""Skills: the repository on the request's connection, the SKILL.md parser and the archive
reader (held to the settings' limits), and the use cases."""

from __future__ import annotations

from dishka import Provider, Scope, provide, provide_all

from adapters.postgres.skills import PgSkillRepository
from adapters.skills.front_matter import YamlFrontMatterParser
from adapters.skills.zip_bundle import ZipSkillBundleReader
from application.ports.skill_bundle import FrontMatterParser, SkillBundleReader
from application.ports.skill_repository import SkillRepository
from application.use_cases.create_skill import CreateSkill
from application.use_cases.delete_skill_file import DeleteSkillFile
from application.use_cases.get_skill import GetSkill
from application.use_cases.get_skill_file import GetSkillFile
from application.use_cases.import_skill import ImportSkill
from application.use_cases.list_skills import ListSkills
from application.use_cases.put_skill_file import PutSkillFile
from application.use_cases.soft_delete_skill import SoftDeleteSkill
from application.use_cases.update_skill import UpdateSkill
from domain.skills import SkillLimits
from entrypoints.config import Settings


class SkillProvider(Provider):
    """Everything behind `/skills/manage`, `/skills/files` and `/skills/import`."""

    scope = Scope.REQUEST

    skills = provide(PgSkillRepository, provides=SkillRepository)
    use_cases = provide_all(
        CreateSkill,
        ListSkills,
        GetSkill,
        UpdateSkill,
        SoftDeleteSkill,
        PutSkillFile,
        GetSkillFile,
        DeleteSkillFile,
        ImportSkill,
    )

    @provide(scope=Scope.APP)
    def limits(self, settings: Settings) -> SkillLimits:
        return settings.skill_limits

    @provide(scope=Scope.APP)
    def parser(self) -> FrontMatterParser:
        return YamlFrontMatterParser()

    @provide(scope=Scope.APP)
    def reader(self, limits: SkillLimits) -> SkillBundleReader:
        return ZipSkillBundleReader(
            max_entries=limits.max_files,
            max_entry_bytes=limits.max_file_bytes,
            max_total_bytes=limits.max_total_bytes,
        )
