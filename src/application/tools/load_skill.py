from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from application.ports.agent_tool import ToolContext, ToolFailed, ToolOffer
from application.ports.chat_model import ToolSpec
from application.ports.skill_catalog import SkillCatalog, SkillSummary
from domain.agents import Agent
from domain.identity import Caller

SKILL_TOOL = "load_skill"


class LoadSkillTool:
    """`load_skill`: the model loads the full instructions (SKILL.md) of one of the agent's
    skills by name. Offered only when the agent has active skills; they are listed (name and
    description) in the instructions and are the only names the call accepts."""

    def __init__(self, skills: SkillCatalog) -> None:
        self._skills = skills

    async def offer(self, caller: Caller, agent: Agent) -> ToolOffer | None:
        if not agent.skill_ids:
            return None
        skills = await self._skills.describe(caller.org_id, agent.skill_ids)
        if not skills:
            return None

        async def execute(arguments: dict[str, Any], context: ToolContext) -> Any:
            return await self._load(skills, arguments, context)

        listed = "\n".join(f"- {s.name}: {s.description}" for s in skills)
        return ToolOffer(
            spec=ToolSpec(
                name=SKILL_TOOL,
                description="Load the full instructions of one of your skills by name.",
                parameters={
                    "type": "object",
                    "properties": {"name": {"type": "string", "enum": [s.name for s in skills]}},
                    "required": ["name"],
                },
            ),
            execute=execute,
            instructions=f"Skills you can load with the {SKILL_TOOL} tool when useful:\n{listed}",
        )

    async def _load(
        self, skills: Sequence[SkillSummary], arguments: dict[str, Any], context: ToolContext
    ) -> Any:
        wanted = arguments.get("name")
        skill = next((s for s in skills if s.name == wanted), None)
        if skill is None:
            raise ToolFailed(f"No skill named {wanted!r} is available.")
        body = await self._skills.load(context.caller.org_id, skill.id)
        if body is None:
            raise ToolFailed(f"The skill {wanted!r} is no longer available.")
        return {"name": skill.name, "instructions": body}
