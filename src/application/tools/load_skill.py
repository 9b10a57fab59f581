from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape

from application.agent.tool_calls import TOOL_RESULT_CHARS
from application.ports.agent_tool import ToolContext, ToolFailed, ToolOffer
from application.ports.chat_model import ToolSpec
from application.ports.skill_catalog import SkillCatalog, SkillSummary
from domain.agents import Agent
from domain.identity import Caller

SKILL_TOOL = "load_skill"
LISTED_FILES = 50

SKILLS_PREAMBLE = (
    "Your organization has given you skills: instructions of its own for particular kinds of "
    "task. When the member's request matches a skill's description, call the "
    f"{SKILL_TOOL} tool with the skill's name before answering, then follow the instructions "
    "it returns as your organization's own. They come from the organization, not from the "
    "member you are talking with."
)


class LoadSkillTool:
    """`load_skill`: the model loads the instructions of one of the agent's skills by name.

    Offered only when the agent has active skills. They are listed by name and description in
    the instructions, as an `<available_skills>` catalog framed as the organization's own
    instructions (the agentskills.io client guide's shape), and the call's `name` is an enum
    of their names. The result is `{name, files, instructions}`: SKILL.md's body (front matter
    stripped) and the paths of the skill's bundled files (at most `LISTED_FILES`; `moreFiles`
    counts the rest). A skill deleted since it was listed is refused.
    """

    def __init__(self, skills: SkillCatalog) -> None:
        self._skills = skills

    async def offer(self, caller: Caller, agent: Agent) -> ToolOffer | None:
        skills = await active_skills(self._skills, caller, agent)
        if not skills:
            return None

        async def execute(arguments: dict[str, Any], context: ToolContext) -> Any:
            return await self._load(skills, arguments, context)

        return ToolOffer(
            spec=ToolSpec(
                name=SKILL_TOOL,
                description="Load the full instructions of one of your organization's skills "
                "by name, with the list of the files bundled with it.",
                parameters=skill_name_parameters(skills),
            ),
            execute=execute,
            instructions=f"{SKILLS_PREAMBLE}\n{skill_catalog(skills)}",
        )

    async def _load(
        self, skills: Sequence[SkillSummary], arguments: dict[str, Any], context: ToolContext
    ) -> Any:
        skill = listed_skill(skills, arguments)
        loaded = await self._skills.load(context.caller, skill.id)
        if loaded is None:
            raise ToolFailed(f"The skill {skill.name!r} is no longer available.")
        result: dict[str, Any] = {"name": skill.name, "files": loaded.files[:LISTED_FILES]}
        if len(loaded.files) > LISTED_FILES:
            result["moreFiles"] = len(loaded.files) - LISTED_FILES
        return fit_text(result, "instructions", loaded.instructions)


async def active_skills(catalog: SkillCatalog, caller: Caller, agent: Agent) -> list[SkillSummary]:
    """The agent's skills that are still active (none asked for when it lists none)."""
    return await catalog.describe(caller, agent.skill_ids) if agent.skill_ids else []


def skill_name_parameters(skills: Sequence[SkillSummary], **more: Any) -> dict[str, Any]:
    """The JSON Schema of a call naming one of `skills` (and the `more` properties)."""
    return {
        "type": "object",
        "properties": {
            "name": {"type": "string", "enum": [s.name for s in skills]},
            **more,
        },
        "required": ["name", *more],
    }


def listed_skill(skills: Sequence[SkillSummary], arguments: dict[str, Any]) -> SkillSummary:
    """The skill a call names; `ToolFailed` when it is not one of those offered."""
    wanted = arguments.get("name")
    skill = next((s for s in skills if s.name == wanted), None)
    if skill is None:
        raise ToolFailed(f"No skill named {wanted!r} is available.")
    return skill


def skill_catalog(skills: Sequence[SkillSummary]) -> str:
    """The `<available_skills>` listing: each skill's name and description."""
    entries = "".join(
        f"  <skill>\n    <name>{escape(s.name)}</name>\n"
        f"    <description>{escape(s.description)}</description>\n  </skill>\n"
        for s in skills
    )
    return f"<available_skills>\n{entries}</available_skills>"


def fit_text(
    result: dict[str, Any], key: str, text: str, limit: int = TOOL_RESULT_CHARS
) -> dict[str, Any]:
    """`result` with `text` at `key`, last. When the JSON the model is given would pass `limit`
    characters (where the agent loop cuts a tool's result), the text is cut to fit and a
    `truncated` note, placed before it, says so."""
    whole = {**result, key: text}
    if len(_json(whole)) <= limit:
        return whole
    # The note is sized with the full length twice, so it never grows once the text is cut.
    note = f"Only the first {len(text)} of {len(text)} characters are shown."
    room = max(0, limit - len(_json({**result, "truncated": note, key: ""})))
    keep = room
    while keep > 0 and len(_json(text[:keep])) - 2 > room:
        keep -= len(_json(text[:keep])) - 2 - room
    keep = max(keep, 0)
    note = f"Only the first {keep} of {len(text)} characters are shown."
    return {**result, "truncated": note, key: text[:keep]}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
