"""`InlineSkills`: the skills put into the instructions of a model that takes no tools."""

from __future__ import annotations

import pytest

from application.agent.inline_skills import (
    CHARS_PER_TOKEN,
    CUT_NOTE,
    INLINE_CANDIDATES,
    INLINE_PREAMBLE,
    InlineSkills,
    rank_skills,
    terms,
)
from application.ports.skill_catalog import SkillSummary
from domain.identity import Caller
from tests.fakes.agents import an_agent as agent
from tests.fakes.skill_catalog import FakeSkill, FakeSkillCatalog

CALLER = Caller(user_id="user_1", org_id="org_a")


def summary(skill_id: int, name: str, description: str) -> SkillSummary:
    return SkillSummary(id=skill_id, name=name, description=description)


EXPENSES = summary(1, "expense-reports", "File and check expense claims against the policy.")
CONTRACTS = summary(2, "contract-review", "Review contracts, NDAs and other legal agreements.")
TONE = summary(3, "tone", "House style for every written answer.")


# Selection


def test_words_are_compared_lower_cased_without_plural_or_verb_endings_or_common_words():
    assert terms("Reviewing the Contracts, please! Policies; processes; classes") == {
        "review",
        "contract",
        "policy",
        "process",
        "class",
    }
    assert terms("how can you help with it?") == set()
    assert terms("Réunion à 10h") == {"réunion", "10h"}


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Can you review this NDA?", [CONTRACTS]),
        ("My expense claim was refused", [EXPENSES]),
        ("Which policy applies to contracts?", [CONTRACTS, EXPENSES]),
        ("What is the weather like?", []),
        ("", []),
    ],
)
def test_skills_sharing_words_with_the_message_are_chosen_best_first(message, expected):
    assert rank_skills([EXPENSES, CONTRACTS, TONE], message) == expected


def test_a_word_of_the_name_counts_more_than_one_of_the_description():
    reports = summary(4, "reports", "Monthly numbers.")
    claims = summary(5, "numbers", "Reports on claims and more claims.")
    assert rank_skills([claims, reports], "monthly reports") == [reports, claims]


def test_ties_keep_the_agents_order():
    first = summary(7, "alpha", "Travel bookings.")
    second = summary(8, "beta", "Travel refunds.")
    assert rank_skills([second, first], "travel") == [second, first]
    assert rank_skills([first, second], "travel") == [first, second]


# The section


def skill(summary_: SkillSummary, body: str, **changes: object) -> FakeSkill:
    return FakeSkill(
        id=summary_.id,
        name=summary_.name,
        description=summary_.description,
        body=body,
        **changes,  # type: ignore[arg-type]
    )


async def section(catalog: FakeSkillCatalog, message: str, skill_ids: list[int], **kw: int) -> str:
    return await InlineSkills(catalog, **kw).instructions(
        CALLER, agent(skill_ids=skill_ids), message
    )


async def test_the_matching_skills_body_goes_in_framed_as_the_organizations_instructions():
    catalog = FakeSkillCatalog(
        skill(EXPENSES, "\n# Expenses\nReceipts over 50 EUR.\n"), skill(CONTRACTS, "# Contracts")
    )
    text = await section(catalog, "Is my expense claim fine?", [2, 1])
    assert text == (
        "Your organization has given you skills: instructions of its own for particular kinds "
        "of task. The ones below match the member's latest message; follow them when they "
        "apply. They come from the organization, not from the member you are talking with.\n\n"
        '<skill_content name="expense-reports">\n'
        "# Expenses\nReceipts over 50 EUR.\n"
        "</skill_content>"
    )
    assert catalog.calls == [("describe", [2, 1]), ("load", 1)]


@pytest.mark.parametrize(
    ("message", "skill_ids"),
    [("Is my expense claim fine?", []), ("   ", [1]), ("What is the weather like?", [1])],
)
async def test_nothing_goes_in_without_skills_a_message_or_a_match(message, skill_ids):
    catalog = FakeSkillCatalog(skill(EXPENSES, "# Expenses"))
    assert await section(catalog, message, skill_ids) == ""
    if not skill_ids or not message.strip():
        assert catalog.calls == []


@pytest.mark.parametrize("gone", [{"deleted": True}, {"org_id": "org_b"}])
async def test_deleted_and_foreign_skills_never_go_in(gone):
    catalog = FakeSkillCatalog(skill(EXPENSES, "# Expenses", **gone))
    assert await section(catalog, "expense claim", [1]) == ""


async def test_skills_that_do_not_fit_the_budget_are_skipped_and_smaller_ones_still_go_in():
    catalog = FakeSkillCatalog(
        skill(EXPENSES, "E" * 300),
        skill(CONTRACTS, "C" * 600),
        skill(TONE, "T" * 100),
    )
    # Each skill shares one word of its description with the message: a tie, in agent order.
    message = "policy agreements answer"
    budget = 250  # tokens: 1000 characters
    text = await section(catalog, message, [1, 2, 3], budget_tokens=budget)
    assert len(text) <= budget * CHARS_PER_TOKEN
    assert "E" * 300 in text and "T" * 100 in text and "C" * 10 not in text
    assert text.index("expense-reports") < text.index('"tone"')


async def test_the_best_skill_is_cut_to_fit_when_it_alone_is_too_long():
    catalog = FakeSkillCatalog(skill(EXPENSES, "word " * 1000), skill(CONTRACTS, "# Contracts"))
    text = await section(catalog, "expense policy for contracts", [1, 2], budget_tokens=200)
    assert text.startswith(INLINE_PREAMBLE)
    assert len(text) <= 200 * CHARS_PER_TOKEN
    assert '<skill_content name="expense-reports">\nword word' in text
    assert text.endswith(CUT_NOTE + "\n</skill_content>")
    # Nothing else is put after a skill that had to be cut.
    assert "Contracts" not in text


async def test_a_best_skill_that_would_keep_too_little_once_cut_is_left_out():
    catalog = FakeSkillCatalog(skill(EXPENSES, "word " * 1000))
    assert await section(catalog, "expense", [1], budget_tokens=80) == ""


async def test_at_most_a_few_matching_skills_are_loaded():
    skills = [
        FakeSkill(id=n, name=f"travel-{n}", description="Travel rules.", body=f"Rule {n}.")
        for n in range(1, 7)
    ]
    catalog = FakeSkillCatalog(*skills)
    text = await section(catalog, "travel", [1, 2, 3, 4, 5, 6])
    loads = [c for c in catalog.calls if c[0] == "load"]
    assert loads == [("load", n) for n in range(1, INLINE_CANDIDATES + 1)]
    assert text.count("<skill_content") == INLINE_CANDIDATES
