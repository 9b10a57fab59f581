"""`find_tools`: offered instead of a long list of tools, it finds those that fit a task and
makes them callable for the rest of the answer, so that the model's context holds only the
tools it needs."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from application.ports.agent_tool import ToolContext, ToolFailed, ToolOffer
from application.ports.chat_model import ToolSpec

FIND_TOOLS = "find_tools"
QUERY_CHARS = 500
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_WORD = re.compile(r"[a-z0-9]+")


def find_tools_offer(specs: Sequence[ToolSpec], limit: int) -> ToolOffer:
    """The `find_tools` offer over `specs` (offered unlisted beside it): a call's `query` is
    matched against their names and descriptions (`rank`); at most `limit` are returned, by
    name and description, and revealed to the model's next steps."""
    tools = tuple(specs)

    async def execute(arguments: dict[str, Any], context: ToolContext) -> Any:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolFailed(f"{FIND_TOOLS} needs a non-empty query.")
        found = rank(query[:QUERY_CHARS], tools, limit)
        context.reveal([spec.name for spec in found])
        result: dict[str, Any] = {
            "tools": [{"name": spec.name, "description": spec.description} for spec in found]
        }
        if not found:
            result["note"] = "No tool matches these words; try other words for the task."
        return result

    return ToolOffer(
        spec=ToolSpec(
            name=FIND_TOOLS,
            description=f"Find, among the {len(tools)} tools you may use, those that fit a "
            "task: describe the task in a few words. The tools found can be called in the "
            "rest of this answer.",
            parameters={
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to do"}},
                "required": ["query"],
            },
        ),
        execute=execute,
    )


def rank(query: str, specs: Sequence[ToolSpec], limit: int) -> list[ToolSpec]:
    """The specs sharing words with `query`, best first, at most `limit`: a word of the query
    found in a tool's name counts two, in its description one; ties go by name, so the same
    query always finds the same tools."""
    wanted = _words(query)
    scored: list[tuple[int, str, ToolSpec]] = []
    for spec in specs:
        in_name, in_description = _words(spec.name), _words(spec.description)
        score = sum(2 if w in in_name else 1 if w in in_description else 0 for w in wanted)
        if score:
            scored.append((-score, spec.name, spec))
    scored.sort(key=lambda entry: entry[:2])
    return [spec for _, _, spec in scored[:limit]]


def _words(text: str) -> set[str]:
    """Lower-case words, camelCase and snake_case split, a plural's final `s` dropped."""
    words = _WORD.findall(_CAMEL.sub(r"\1 \2", text).lower())
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words}
