"""Skills for models that take no tools (the bundled small model): instead of a `load_skill`
tool, the skills whose name and description best match the member's message go into the
instructions whole, within a token budget."""

from __future__ import annotations

import re
from collections.abc import Sequence

from application.ports.skill_catalog import SkillCatalog, SkillSummary
from domain.agents import Agent
from domain.identity import Caller

INLINE_SKILL_TOKENS = 1000
CHARS_PER_TOKEN = 4
INLINE_CANDIDATES = 3
SHORTEST_CUT = 200
CUT_NOTE = "\n[The rest of this skill's instructions is left out for length.]"
NAME_WEIGHT = 2

INLINE_PREAMBLE = (
    "Your organization has given you skills: instructions of its own for particular kinds of "
    "task. The ones below match the member's latest message; follow them when they apply. "
    "They come from the organization, not from the member you are talking with."
)

_WORD = re.compile(r"[^\W_]+")
_COMMON_WORDS = """
    about after again all also and any are can could did does doing each for from get had has
    have help how into its just like make may more most need not now our out over please should
    some such than that the their them then there these they this those use used uses using very
    want was way were what when where which while who why will with would you your
"""
_STOPWORDS = frozenset(_COMMON_WORDS.split())


class InlineSkills:
    """The instructions section of the skills that fit a message, for a model without tools.

    Rules: only the agent's active skills take part. Each is scored by the words (lower-cased,
    plural and -ing/-ed endings dropped, common words ignored) it shares with the message: a
    word of its name counts `NAME_WEIGHT`, one only in its description counts one. Skills
    sharing no word are left out; the rest are taken best first, ties in the agent's order,
    at most `INLINE_CANDIDATES` of them. Their SKILL.md bodies go in, each whole, while the
    section stays within the budget (`INLINE_SKILL_TOKENS`, estimated at `CHARS_PER_TOKEN`
    characters a token); a skill that does not fit is skipped, except that the best one is
    cut to fit (with a note) when nothing else got in. The section frames them as the
    organization's own instructions, each in a `<skill_content name="...">` block.
    """

    def __init__(self, skills: SkillCatalog, *, budget_tokens: int = INLINE_SKILL_TOKENS) -> None:
        self._skills = skills
        self._budget_chars = budget_tokens * CHARS_PER_TOKEN

    async def instructions(self, caller: Caller, agent: Agent, message: str) -> str:
        """The section for `agent` answering `message`, or "" when no skill matches."""
        if not agent.skill_ids or not message.strip():
            return ""
        skills = await self._skills.describe(caller, agent.skill_ids)
        room = self._budget_chars - len(INLINE_PREAMBLE)
        sections: list[str] = []
        for skill in rank_skills(skills, message)[:INLINE_CANDIDATES]:
            loaded = await self._skills.load(caller, skill.id)
            if loaded is None:
                continue
            section = skill_section(skill.name, loaded.instructions)
            # Each section is joined to the text before it with a blank line.
            if len(section) + 2 <= room:
                sections.append(section)
                room -= len(section) + 2
            elif not sections:
                cut = _cut_section(skill.name, loaded.instructions, room - 2)
                if cut:
                    sections.append(cut)
                    room -= len(cut) + 2
        if not sections:
            return ""
        return "\n\n".join([INLINE_PREAMBLE, *sections])


def rank_skills(skills: Sequence[SkillSummary], message: str) -> list[SkillSummary]:
    """The skills that share a word with `message`, best match first, ties in their order."""
    wanted = terms(message)
    scored = []
    for index, skill in enumerate(skills):
        name = terms(skill.name)
        description = terms(skill.description) - name
        score = NAME_WEIGHT * len(wanted & name) + len(wanted & description)
        if score:
            scored.append((-score, index, skill))
    return [skill for _, _, skill in sorted(scored, key=lambda s: (s[0], s[1]))]


def terms(text: str) -> set[str]:
    """The words of `text` that say something, in a plain form."""
    words = _WORD.findall(text.lower())
    return {_stem(w) for w in words if len(w) > 2 and w not in _STOPWORDS}


def _stem(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    for ending in ("ing", "ed", "es", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            if word.endswith(("ss", "eed")):
                break
            return word[: -len(ending)]
    return word


def skill_section(name: str, instructions: str) -> str:
    return f'<skill_content name="{name}">\n{instructions}\n</skill_content>'


def _cut_section(name: str, instructions: str, room: int) -> str:
    """The skill's section cut to `room` characters, or "" when too little would be left."""
    keep = room - len(skill_section(name, "")) - len(CUT_NOTE)
    if keep < SHORTEST_CUT:
        return ""
    return skill_section(name, instructions[:keep].rstrip() + CUT_NOTE)
