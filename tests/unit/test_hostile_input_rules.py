"""Hostile input the domain refuses with a 400 naming the field (issue 12): NUL and unpaired
surrogates in stored text, control and bidirectional characters in names, non-canonical ids."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from application.use_cases.create_agent import CreateAgent, CreateAgentCommand
from application.use_cases.create_agent_tag import CreateAgentTag, CreateAgentTagCommand
from application.use_cases.create_knowledge_base import (
    CreateKnowledgeBase,
    CreateKnowledgeBaseCommand,
)
from application.use_cases.search_knowledge_base import (
    SearchKnowledgeBase,
    SearchKnowledgeBaseQuery,
)
from domain.agents import validate_agent_name, validate_tag_name
from domain.conversations import (
    clean_generated_title,
    fallback_title,
    parse_thread_id,
    validate_list_limit,
    validate_messages,
    validate_title,
)
from domain.errors import Invalid
from domain.identity import ADMIN_ROLE, Caller
from domain.ids import parse_positive_id, parse_uuid
from domain.knowledge_bases import (
    validate_description,
    validate_extraction_schema,
    validate_name,
)
from domain.models import parse_model_ref
from domain.text import check_single_line, check_storable, check_storable_json, is_storable
from domain.text import parse_text as validate_text
from tests.fakes import FakeKnowledgeBases, FakeUnitOfWork
from tests.fakes.agents import FakeAgents
from tests.fakes.chat import fake_meter
from tests.fakes.embeddings import FakeEmbedderRegistry
from tests.fakes.skills import FakeSkillRepository

ADMIN = Caller(user_id="user_1", org_id="org_a", role=ADMIN_ROLE)
UUID = "5b0d0c8e-3f43-4a52-9d2b-0d8f6f1f9a11"
BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"]


def fields_of(error: pytest.ExceptionInfo[Invalid]) -> list[object]:
    return [d["field"] for d in error.value.details]


def text_message(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "parts": [{"type": "text", "text": text}]}]


def file_message(**part: Any) -> list[dict[str, Any]]:
    base = {"type": "file", "url": "https://x.test/a.pdf", "mediaType": "application/pdf"}
    return [{"role": "user", "parts": [{**base, **part}]}]


# One row per stored text: the validator given the hostile value, and the field it must name.
NUL_CASES: list[tuple[str, Callable[[], object], str]] = [
    ("kb name", lambda: validate_name("Do\x00cs"), "name"),
    ("kb description", lambda: validate_description("a\x00b"), "description"),
    ("agent name", lambda: validate_agent_name("Hel\x00per"), "name"),
    (
        "agent description",
        lambda: validate_text("a\x00", field="description", limit=9),
        "description",
    ),
    ("agent role", lambda: validate_text("\x00", field="role", limit=9), "role"),
    ("tag name", lambda: validate_tag_name("sup\x00port"), "name"),
    ("title", lambda: validate_title("a\x00b"), "title"),
    (
        "message text",
        lambda: validate_messages(text_message("hi\x00")),
        "messages[0].parts[0].text",
    ),
    ("file url", lambda: validate_messages(file_message(url="a\x00")), "messages[0].parts[0].url"),
    (
        "file media type",
        lambda: validate_messages(file_message(mediaType="text/pl\x00ain")),
        "messages[0].parts[0].mediaType",
    ),
    (
        "file name",
        lambda: validate_messages(file_message(filename="a\x00.pdf")),
        "messages[0].parts[0].filename",
    ),
    (
        "schema value",
        lambda: validate_extraction_schema({"properties": {"a": {"description": "x\x00"}}}),
        "extractionSchema",
    ),
    (
        "schema key",
        lambda: validate_extraction_schema({"properties": {"a\x00": {"type": "string"}}}),
        "extractionSchema",
    ),
    (
        "schema list item",
        lambda: validate_extraction_schema({"required": ["ok", "n\x00"]}),
        "extractionSchema",
    ),
    (
        "chat model",
        lambda: parse_model_ref("openai:gpt\x00", field="model", providers=("openai",)),
        "model",
    ),
]


@pytest.mark.parametrize(("case", "validate", "field"), NUL_CASES, ids=[c[0] for c in NUL_CASES])
def test_nul_in_stored_text_is_refused_naming_the_field(case, validate, field):
    with pytest.raises(Invalid) as error:
        validate()
    assert fields_of(error) == [field]


def test_storable_text_rule():
    assert check_storable("tab\tand\nnewline é 日本 🙂", "f") == "tab\tand\nnewline é 日本 🙂"
    assert is_storable("ok") and not is_storable("a\x00") and not is_storable("\ud800")
    with pytest.raises(Invalid, match=r"^f must not contain NUL characters$"):
        check_storable("\x00", "f")
    with pytest.raises(Invalid, match=r"^f must be valid Unicode text$"):
        check_storable("a\udc80", "f")


def test_storable_json_walks_deep_values_without_recursion():
    deep: object = "x\x00"
    for _ in range(100_000):
        deep = [{"k": deep}]
    with pytest.raises(Invalid) as error:
        check_storable_json({"userMetadata": deep}, "userMetadata")
    assert fields_of(error) == ["userMetadata"]
    check_storable_json({"a": [1, 2.5, None, True, {"b": "fine"}]}, "userMetadata")


@pytest.mark.parametrize("char", ["\x07", "\t", "\x1b", "\x7f", "\x85", *BIDI])
@pytest.mark.parametrize(
    "validate",
    [validate_name, validate_agent_name, validate_tag_name, validate_title],
    ids=["kb", "agent", "tag", "title"],
)
def test_names_and_titles_refuse_control_and_bidirectional_characters(validate, char):
    with pytest.raises(Invalid, match="must not contain control characters") as error:
        validate(f"inv{char}oice")
    assert fields_of(error) in (["name"], ["title"])


@pytest.mark.parametrize("separator", ["\n", "\r", "\u2028", "\u2029"])
@pytest.mark.parametrize(
    "validate", [validate_name, validate_agent_name, validate_tag_name], ids=["kb", "agent", "tag"]
)
def test_names_are_one_line(validate, separator):
    with pytest.raises(Invalid, match=r"^name must be a single line$"):
        validate(f"two{separator}lines")


def test_names_keep_ordinary_unicode():
    assert validate_name("  Résumés 日本語 \u200d🙂 ") == "Résumés 日本語 \u200d🙂"
    assert check_single_line("Straße", "name") == "Straße"


def test_titles_made_from_text_lose_bidirectional_controls():
    assert fallback_title("\u202eevil\u202c plan", []) == "evil plan"
    assert clean_generated_title("Title: \u2066Trip\u2069 plans") == "Trip plans"
    assert validate_title(clean_generated_title("\u202eTrip plans") or "") == "Trip plans"


@pytest.mark.parametrize(
    "value",
    [
        " 42",
        "42 ",
        "+42",
        "-1",
        "0",
        "4 2",
        "4_2",
        "0x2a",
        "\u0664\u0662",
        "\uff14\uff12",
        "9223372036854775808",
        "9" * 5000,
        "",
        4.0,
        True,
        [42],
    ],
)
def test_integer_ids_accept_only_plain_ascii_digits(value):
    with pytest.raises(Invalid, match=r"^Valid agent ID is required$"):
        parse_positive_id(value, "Valid agent ID is required")


def test_integer_ids_in_canonical_form():
    assert parse_positive_id("9223372036854775807", "bad") == 2**63 - 1
    assert parse_positive_id(7, "bad") == parse_positive_id("7", "bad") == 7


@pytest.mark.parametrize(
    "value",
    [
        UUID.replace("-", ""),
        "{" + UUID + "}",
        "urn:uuid:" + UUID,
        " " + UUID,
        UUID + " ",
        UUID + "\n",
        UUID[:-1] + "g",
        UUID[:8] + "_" + UUID[9:],
        "\u0665" + UUID[1:],
        UUID + "0",
        "",
        "x" * 5000,
    ],
)
def test_uuids_accept_only_the_8_4_4_4_12_form(value):
    with pytest.raises(Invalid, match=r"^threadId must be a valid UUID$"):
        parse_thread_id(value)
    with pytest.raises(Invalid, match=r"^bad$"):
        parse_uuid(value, "bad")


def test_uuids_come_back_lower_case():
    assert parse_uuid(UUID, "bad") == UUID
    assert parse_thread_id(UUID.upper()) == UUID


@pytest.mark.parametrize("value", [" 5", "5.0", "1_0", "9" * 5000, "0", "101"])
def test_list_limit_refuses_non_canonical_numbers(value):
    with pytest.raises(Invalid, match=r"^limit must be an integer from 1 to 100$"):
        validate_list_limit(value)


async def test_create_knowledge_base_with_nul_writes_nothing():
    kbs = FakeKnowledgeBases()
    use_case = CreateKnowledgeBase(kbs, FakeUnitOfWork(kbs))
    for fields in (
        {"name": "Do\x00cs"},
        {"name": "Docs", "description": "\x00"},
        {"name": "Docs", "extraction_schema": {"properties": {"\x00": {}}}},
        {"name": "\u202eDocs"},
    ):
        with pytest.raises(Invalid):
            await use_case.execute(CreateKnowledgeBaseCommand.parse(caller=ADMIN, **fields))  # type: ignore[arg-type]
    assert kbs.rows == {}


async def test_create_agent_and_tag_with_nul_write_nothing():
    agents, kbs = FakeAgents(), FakeKnowledgeBases()
    uow = FakeUnitOfWork(agents, kbs)
    create = CreateAgent(agents, kbs, FakeSkillRepository(), uow, "local:smollm2-135m")
    for fields in ({"name": "A\x00"}, {"name": "A", "role": "\x00"}, {"name": "\u2067A"}):
        with pytest.raises(Invalid):
            await create.execute(CreateAgentCommand.parse(caller=ADMIN, **fields))  # type: ignore[arg-type]
    with pytest.raises(Invalid, match=r"^name must not contain control characters$"):
        await CreateAgentTag(agents, uow).execute(
            CreateAgentTagCommand.parse(caller=ADMIN, name="t\x00")
        )
    assert uow.commits == 0


async def test_search_query_with_nul_is_refused_before_any_lookup():
    kbs = FakeKnowledgeBases()
    search = SearchKnowledgeBase(kbs, None, FakeEmbedderRegistry(), fake_meter())  # type: ignore[arg-type]
    with pytest.raises(Invalid, match=r"^query must not contain NUL characters$") as error:
        await search.execute(
            SearchKnowledgeBaseQuery.parse(caller=ADMIN, kb_ids=[1], query="a\x00b")
        )
    assert fields_of(error) == ["query"]
