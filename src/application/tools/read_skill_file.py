from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from application.ports.agent_tool import ToolContext, ToolFailed, ToolOffer
from application.ports.chat_model import ToolSpec
from application.ports.skill_catalog import SkillCatalog, SkillSummary
from application.tools.load_skill import (
    SKILL_TOOL,
    active_skills,
    fit_text,
    listed_skill,
    skill_name_parameters,
)
from domain.agents import Agent
from domain.errors import Invalid
from domain.identity import Caller
from domain.skills import check_skill_path

READ_TOOL = "read_skill_file"
READ_MAX_BYTES = 64 * 1024

PATH_PARAMETER = {
    "type": "string",
    "description": "The file's path in the skill's folder, as listed by load_skill "
    "(for example references/guide.md)",
}


class ReadSkillFileTool:
    """`read_skill_file`: the model reads one text file bundled with one of the agent's skills
    (a path `load_skill` listed, or SKILL.md itself).

    Offered only when the agent has active skills; `name` is an enum of their names and `path`
    a path in the skill's folder. The result is `{name, path, contentType, text}`. Refused
    (`ToolFailed`): a skill not offered, deleted since, or of another organization; a path the
    skill does not have; a binary file (not UTF-8, or holding NUL bytes); a file over
    `READ_MAX_BYTES` (64 KiB), which is not even fetched. A text longer than the agent loop
    passes back to the model is cut, with a `truncated` note before it.
    """

    def __init__(self, skills: SkillCatalog) -> None:
        self._skills = skills

    async def offer(self, caller: Caller, agent: Agent) -> ToolOffer | None:
        skills = await active_skills(self._skills, caller, agent)
        if not skills:
            return None

        async def execute(arguments: dict[str, Any], context: ToolContext) -> Any:
            return await self._read(skills, arguments, context)

        return ToolOffer(
            spec=ToolSpec(
                name=READ_TOOL,
                description="Read one text file bundled with one of your organization's "
                f"skills, by the skill's name and the file's path ({SKILL_TOOL} lists them).",
                parameters=skill_name_parameters(skills, path=PATH_PARAMETER),
            ),
            execute=execute,
            instructions=f"When a skill's instructions refer to one of its files, read it with "
            f"the {READ_TOOL} tool; its content is part of the organization's instructions.",
        )

    async def _read(
        self, skills: Sequence[SkillSummary], arguments: dict[str, Any], context: ToolContext
    ) -> Any:
        skill = listed_skill(skills, arguments)
        path = _path(arguments.get("path"))
        missing = ToolFailed(f"No file {path!r} is available in the skill {skill.name!r}.")
        try:
            check_skill_path(path)
        except Invalid:
            raise missing from None
        file = await self._skills.read_file(
            context.caller, skill.id, path, max_bytes=READ_MAX_BYTES
        )
        if file is None:
            raise missing
        if file.content is None:
            raise ToolFailed(
                f"The file {path!r} of the skill {skill.name!r} is too large to read "
                f"({file.size} bytes; the limit is {READ_MAX_BYTES})."
            )
        text = _text(file.content)
        if text is None:
            raise ToolFailed(
                f"The file {path!r} of the skill {skill.name!r} is not a text file "
                f"({file.content_type}); only text files can be read."
            )
        result = {"name": skill.name, "path": file.path, "contentType": file.content_type}
        return fit_text(result, "text", text)


def _path(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ToolFailed("The call needs the path of one of the skill's files.")
    # Models often write paths relative to the current folder.
    return value.strip().removeprefix("./")


def _text(content: bytes) -> str | None:
    """The content as UTF-8 text (byte order mark dropped), or None when it is binary."""
    if b"\x00" in content:
        return None
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
