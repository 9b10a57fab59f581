"""A knowledge base's search language: the rule on its value, its default, and what a change
of it does (the full-text index rewritten in the same unit of work)."""

from __future__ import annotations

import pytest

from application.use_cases.create_knowledge_base import (
    CreateKnowledgeBase,
    CreateKnowledgeBaseCommand,
)
from application.use_cases.update_knowledge_base import (
    UpdateKnowledgeBase,
    UpdateKnowledgeBaseCommand,
)
from domain.errors import Invalid
from domain.knowledge_bases import (
    KNOWLEDGE_BASE_CHANGES,
    KNOWLEDGE_BASE_FIELDS,
    LANGUAGE_INVALID,
    SEARCH_LANGUAGES,
    KnowledgeBaseChanges,
    KnowledgeBaseFields,
    parse_language,
)
from domain.values import UNSET, sent_values
from tests.fakes import FakeChunks
from tests.unit.conftest import World

MESSAGE = r"^language must be one of: arabic, armenian, .*, simple, .*, yiddish$"


def test_the_languages_are_postgres_18s_snowball_configurations_and_simple():
    assert len(SEARCH_LANGUAGES) == 30 and len(set(SEARCH_LANGUAGES)) == 30
    assert list(SEARCH_LANGUAGES) == sorted(SEARCH_LANGUAGES)
    assert {"english", "simple", "german", "french", "spanish", "russian"} <= set(SEARCH_LANGUAGES)
    names = LANGUAGE_INVALID.removeprefix("language must be one of: ").split(", ")
    assert names == list(SEARCH_LANGUAGES)


@pytest.mark.parametrize(
    ("value", "parsed"),
    [("english", "english"), ("English", "english"), ("SIMPLE", "simple"), ("gErMaN", "german")],
)
def test_a_language_is_read_in_any_case_and_kept_in_lower_case(value, parsed):
    assert parse_language(value) == parsed


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        " english",
        "english ",
        "klingon",
        "pg_catalog.english",
        "english;drop",
        "TURKİSH",  # a dotted capital I: lower-cases to no language
        "turkish\x00",
        5,
        True,
        ["english"],
        {"name": "english"},
    ],
)
def test_anything_else_is_refused_naming_the_field(value):
    with pytest.raises(Invalid, match=MESSAGE) as raised:
        parse_language(value)
    assert raised.value.details == [{"field": "language", "message": "expected a search language"}]


def test_a_look_alike_that_lower_cases_to_a_language_is_refused():
    assert "tur\u212aish".lower() == "turkish"  # the Kelvin sign lower-cases to an ASCII k
    with pytest.raises(Invalid, match=MESSAGE):
        parse_language("tur\u212aish")


def test_a_new_knowledge_base_is_english_unless_told_otherwise():
    assert KnowledgeBaseFields.parse(name="Docs").language == "english"
    assert KnowledgeBaseFields.parse(name="Docs", language=None).language == "english"
    assert KnowledgeBaseFields.parse(name="Docs", language="Simple").language == "simple"
    with pytest.raises(Invalid, match=MESSAGE):
        KnowledgeBaseFields.parse(name="Docs", language="elvish")


def test_a_change_sends_a_language_or_none_but_cannot_null_it():
    assert sent_values(KnowledgeBaseChanges.parse(language="FRENCH")) == {"language": "french"}
    assert KnowledgeBaseChanges.parse(name="x").language is UNSET
    with pytest.raises(Invalid, match=MESSAGE):
        KnowledgeBaseChanges.parse(language=None)


def test_the_language_is_checked_after_every_other_field():
    assert list(KNOWLEDGE_BASE_FIELDS)[-1] == list(KNOWLEDGE_BASE_CHANGES)[-1] == "language"
    with pytest.raises(Invalid, match=r"^Name must be at most 200 characters$"):
        KnowledgeBaseFields.parse(name="x" * 201, language="elvish")


async def create(world: World, caller, **fields: object) -> int:
    summary = await CreateKnowledgeBase(world.kbs, world.uow).execute(
        CreateKnowledgeBaseCommand.parse(caller=caller, **{"name": "Docs", **fields})  # type: ignore[arg-type]
    )
    return summary.knowledge_base.id


async def test_creation_stores_the_language(world, caller):
    english = await create(world, caller)
    simple = await create(world, caller, language="Simple")
    assert (world.kbs.rows[english].language, world.kbs.rows[simple].language) == (
        "english",
        "simple",
    )


async def test_a_new_language_is_stored_and_reindexes_the_passages_in_the_same_commit(
    world, caller
):
    kb_id = await create(world, caller)
    chunks = FakeChunks()
    update = UpdateKnowledgeBase(world.kbs, chunks, world.jobs, world.uow)
    commits = world.uow.commits
    summary = await update.execute(
        UpdateKnowledgeBaseCommand.parse(caller=caller, kb_id=kb_id, language="German")
    )
    assert summary.knowledge_base.language == "german"
    assert world.kbs.rows[kb_id].language == "german"
    assert chunks.reindexed == [("org_a", kb_id)]
    assert world.uow.commits == commits + 1


@pytest.mark.parametrize("fields", [{"language": "ENGLISH"}, {"name": "Renamed"}])
async def test_the_same_language_or_none_sent_reindexes_nothing(world, caller, fields):
    kb_id = await create(world, caller)
    chunks = FakeChunks()
    update = UpdateKnowledgeBase(world.kbs, chunks, world.jobs, world.uow)
    summary = await update.execute(
        UpdateKnowledgeBaseCommand.parse(caller=caller, kb_id=kb_id, **fields)
    )
    assert summary.knowledge_base.language == "english"
    assert chunks.reindexed == []


async def test_a_refused_language_changes_nothing(world, caller):
    kb_id = await create(world, caller)
    with pytest.raises(Invalid, match=MESSAGE):
        UpdateKnowledgeBaseCommand.parse(caller=caller, kb_id=kb_id, name="New", language="x")
    assert (world.kbs.rows[kb_id].name, world.kbs.rows[kb_id].language) == ("Docs", "english")
