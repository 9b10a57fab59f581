"""How a request's fields become parsed values: one parser per field, in the order the
specification checks them, shared by a resource's creation and its change."""

from __future__ import annotations

import pytest

from adapters.scheduling.cron import CronsimSchedule
from domain.agents import AgentChanges, AgentFields
from domain.errors import Invalid
from domain.knowledge_bases import KnowledgeBaseChanges, KnowledgeBaseFields
from domain.schedules import TaskChanges, TaskFields
from domain.text import parse_line
from domain.values import UNSET, parse_all, parse_sent, sent_values

PARSERS = {"a": lambda v: "A" if v is None else int(v), "b": lambda v: v or "B"}


def test_parse_all_parses_every_field_in_order_and_an_absent_one_as_null():
    assert parse_all(PARSERS, {"b": "x"}) == {"a": "A", "b": "x"}
    assert parse_all(PARSERS, {"a": UNSET}) == {"a": "A", "b": "B"}
    assert list(parse_all(PARSERS, {"b": "y", "a": "2"})) == ["a", "b"]


def test_parse_sent_parses_only_what_was_sent():
    assert parse_sent(PARSERS, {}) == {}
    assert parse_sent(PARSERS, {"a": UNSET, "b": None}) == {"b": "B"}
    assert parse_sent(PARSERS, {"a": "3"}) == {"a": 3}


@pytest.mark.parametrize("parse", [parse_all, parse_sent])
def test_a_field_the_resource_does_not_have_is_a_programming_error(parse):
    with pytest.raises(TypeError, match="unknown fields: c"):
        parse(PARSERS, {"a": 1, "c": 2})


def test_the_first_failing_field_in_the_tables_order_names_the_error():
    with pytest.raises(Invalid, match=r"^Name is required$"):
        AgentFields.parse(model="nope", name=" ")
    with pytest.raises(Invalid, match=r"^model must have the form provider:model$"):
        AgentFields.parse(name="A", model="nope", tag_ids="x")
    with pytest.raises(Invalid, match=r"^Name must be at most 200 characters$"):
        KnowledgeBaseFields.parse(chunk_size=1, name="x" * 201)


def test_creation_fills_defaults_and_a_change_keeps_what_was_not_sent():
    fields = AgentFields.parse(name="  Helper ", skill_ids=[2, 2, 1])
    assert (fields.name, fields.description, fields.model, fields.skill_ids) == (
        "Helper",
        "",
        None,
        [2, 1],
    )
    changes = AgentChanges.parse(role=None, model=None, name=UNSET)
    assert sent_values(changes) == {"role": "", "model": None}
    kb = KnowledgeBaseFields.parse(name="Docs")
    assert (kb.chunk_size, kb.chunk_overlap, kb.embedding_model, kb.source) == (256, 32, None, None)
    assert sent_values(KnowledgeBaseChanges.parse(chunk_overlap=10)) == {"chunk_overlap": 10}


def test_a_new_knowledge_base_checks_its_overlap_against_its_size():
    with pytest.raises(Invalid, match=r"^chunkOverlap must be at least 0 and less than half"):
        KnowledgeBaseFields.parse(name="Docs", chunk_size=64, chunk_overlap=32)
    assert (
        KnowledgeBaseFields.parse(name="Docs", chunk_size=64, chunk_overlap=31).chunk_overlap == 31
    )


def test_a_change_cannot_null_what_a_knowledge_base_or_task_must_have():
    with pytest.raises(Invalid, match=r"^embeddingModel must have the form provider:model$"):
        KnowledgeBaseChanges.parse(embedding_model=None)
    with pytest.raises(Invalid, match=r"^chunkSize must be an integer$"):
        KnowledgeBaseChanges.parse(chunk_size=None)
    with pytest.raises(Invalid, match=r"^agentId may not be null$") as raised:
        TaskChanges.parse(str, name=None, agent_id=None)
    assert raised.value.details == [{"field": "agentId", "message": "may not be null"}]
    assert sent_values(TaskChanges.parse(str, timezone=None)) == {"timezone": "UTC"}
    task = TaskFields.parse(str.upper, agent_id="7", name="n", prompt="p", cron="@daily")
    assert (task.agent_id, task.cron, task.timezone, task.enabled) == (7, "@DAILY", "UTC", True)


@pytest.mark.parametrize(
    ("label", "limit", "required", "too_long"),
    [
        ("Name", 200, "Name is required", "Name must be at most 200 characters"),
        ("name", 120, "name is required", "name must be at most 120 characters"),
    ],
)
def test_one_rule_for_every_name(label, limit, required, too_long):
    assert parse_line("  Trip plans ", field="name", label=label, limit=limit) == "Trip plans"
    for value in (None, 5, "", "   "):
        with pytest.raises(Invalid, match=f"^{required}$"):
            parse_line(value, field="name", label=label, limit=limit)
    with pytest.raises(Invalid, match=f"^{too_long}$"):
        parse_line("x" * (limit + 1), field="name", label=label, limit=limit)
    with pytest.raises(Invalid, match=r"^name must be a single line$"):
        parse_line("a\nb", field="name", label=label, limit=limit)
    with pytest.raises(Invalid, match=r"^name must not contain control characters$"):
        parse_line("a\u202eb", field="name", label=label, limit=limit)


def test_a_title_tells_a_blank_string_from_a_missing_one():
    blank = ("title must not be empty", "empty after trimming")
    with pytest.raises(Invalid, match=r"^title must not be empty$") as raised:
        parse_line("  ", field="title", limit=120, blank=blank)
    assert raised.value.details == [{"field": "title", "message": "empty after trimming"}]
    with pytest.raises(Invalid, match=r"^title is required$"):
        parse_line(None, field="title", limit=120, blank=blank)


def test_each_resource_keeps_the_order_its_fields_were_always_checked_in():
    # A new knowledge base: the chunking before the source and the extraction model.
    with pytest.raises(Invalid, match=r"^chunkOverlap must be at least 0"):
        KnowledgeBaseFields.parse(name="Docs", chunk_overlap=200, extraction_model="local:nope")
    # A change: the extraction model and schema before the embedding model.
    with pytest.raises(Invalid, match=r"^Unknown local chat model 'nope'"):
        KnowledgeBaseChanges.parse(extraction_model="local:nope", embedding_model="x")
    # A task: the cron expression (the engine's rule) before the time zone.
    with pytest.raises(Invalid, match=r"^Invalid cron expression$"):
        TaskFields.parse(
            CronsimSchedule().validate,
            agent_id=1,
            name="n",
            prompt="p",
            cron="61 * * * *",
            timezone="Mars/Base",
        )
