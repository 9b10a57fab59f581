"""Skill catalogs for the agent loop's `load_skill` tool."""

from __future__ import annotations

from application.ports.skill_catalog import SkillSummary


class NoSkillCatalog:
    """The `SkillCatalog` until skills can be created: no skill is active, so agents are
    offered no skill tool. The skills feature replaces it with its repository."""

    async def describe(self, org_id: str, skill_ids: list[int]) -> list[SkillSummary]:
        return []

    async def load(self, org_id: str, skill_id: int) -> str | None:
        return None
