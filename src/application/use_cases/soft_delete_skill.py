from __future__ import annotations

from dataclasses import dataclass

from application.ports.audit_log import AuditLog
from application.ports.skill_repository import SkillRepository
from application.ports.unit_of_work import UnitOfWork
from domain.audit import SKILL_DELETED, NewAuditEntry
from domain.errors import NotFound
from domain.identity import Caller
from domain.skills import SKILL_NOT_FOUND, parse_skill_id


@dataclass(frozen=True, slots=True, kw_only=True)
class SoftDeleteSkillCommand:
    caller: Caller
    skill_id: int

    @classmethod
    def parse(cls, *, caller: Caller, skill_id: object) -> SoftDeleteSkillCommand:
        """A well-formed skill id (400 "Valid skill ID is required")."""
        return cls(caller=caller, skill_id=parse_skill_id(skill_id))


class SoftDeleteSkill:
    """Soft-delete a skill of the caller's organization (agent-platform-api.md §3.2).

    Rules: any member may. A missing, foreign or already deleted skill is 404 "Skill not found". The
    skill leaves every listing and can no longer be read, changed or loaded by agents; its name is
    free for a new skill; its bundled files stay in storage, recorded. Agents that listed it keep
    working and no longer show it among their `skillIds`. The deletion is written to the audit log
    in the same transaction.
    """

    def __init__(self, skills: SkillRepository, audit: AuditLog, uow: UnitOfWork) -> None:
        self._skills = skills
        self._audit = audit
        self._uow = uow

    async def execute(self, command: SoftDeleteSkillCommand) -> None:
        caller = command.caller
        skill_id = command.skill_id
        skill = await self._skills.get(caller.org_id, skill_id)
        if skill is None or not await self._skills.soft_delete(caller.org_id, skill_id):
            raise NotFound(SKILL_NOT_FOUND)
        await self._audit.record(
            NewAuditEntry(
                org_id=caller.org_id,
                actor_user_id=caller.user_id,
                action=SKILL_DELETED,
                target_type="skill",
                target_id=str(skill_id),
                details={"name": skill.manifest.name, "version": skill.version},
            )
        )
        await self._uow.commit()
