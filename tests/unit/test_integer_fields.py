"""Ids and sizes are JSON integers only (CONTRACT.md: `2.0` is refused like `"2"`): every
integer field of every request body of the app, found from the bodies' own types, refuses an
integer in other clothes at the edge, with a `details` entry naming the field; the domain's
settings refuse them too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from litestar import Litestar
from msgspec import inspect as types

from domain.errors import Invalid
from domain.ids import written_otherwise
from domain.org_settings import parse_settings
from entrypoints.config import Settings
from entrypoints.database import Database
from entrypoints.http.app import create_litestar
from entrypoints.http.validation import (
    NOT_AN_INTEGER,
    _edge,
    body_error,
    body_refusal,
    decode_failures,
)

# How an integer `n` may be written as something else: a fraction, an exponent, a string.
DISGUISES = ("{n}.0", "{n}e0", "{n}0E-1", '"{n}"')


@pytest.fixture(scope="module")
def app() -> Litestar:
    # Nothing listens there: building the app opens no connection.
    return create_litestar(Settings.from_env({}), Database("postgresql://nobody@127.0.0.1:9/x"))


Path = tuple[str | int, ...]


def _integers(kind: Any, path: Path) -> Iterator[tuple[Path, int]]:
    """The paths (wire names, 0 for a list's item) of every integer a body of `kind` holds,
    each with the least value its field takes."""
    if isinstance(kind, types.Metadata):
        yield from _integers(kind.type, path)
    elif isinstance(kind, types.IntType):
        least = kind.ge if kind.ge is not None else 1 if kind.gt is None else kind.gt + 1
        yield path, max(least, 1)
    elif isinstance(kind, types.UnionType):
        for member in kind.types:
            yield from _integers(member, path)
    elif isinstance(kind, types.ListType | types.SetType | types.VarTupleType):
        yield from _integers(kind.item_type, (*path, 0))
    elif isinstance(kind, types.StructType):
        for field in kind.fields:
            yield from _integers(field.type, (*path, field.encode_name))


def integer_fields(app: Litestar) -> list[tuple[type[msgspec.Struct], Path, int]]:
    bodies = {
        body
        for route in app.routes
        for handler in getattr(route, "route_handlers", ())
        if (body := _edge(handler).body) is not None
    }
    found = {
        (body, path, least)
        for body in bodies
        for path, least in _integers(types.type_info(body), ())
    }
    return sorted(found, key=lambda item: (item[0].__name__, str(item[1])))


def placed(path: Path, number: str) -> bytes:
    """A body holding `number` (JSON text) at `path` and nothing else."""
    value: Any = "NUMBER"
    for step in reversed(path):
        value = [value] if step == 0 else {step: value}
    return msgspec.json.encode(value).replace(b'"NUMBER"', number.encode())


def dotted(path: Path) -> str:
    """`path` as the domain's details name it: `settings.sidebarPinnedAppIds[0]`."""
    text = ""
    for step in path:
        text += "[0]" if step == 0 else f".{step}" if text else str(step)
    return text


def test_every_integer_field_of_the_bodies_is_found(app):
    found = {(body.__name__, dotted(path)) for body, path, _ in integer_fields(app)}
    assert {
        ("UpdateKnowledgeBaseBody", "kbId"),
        ("SearchBody", "kbIds[0]"),
        ("SearchBody", "topK"),
        ("CreateAgentBody", "knowledgeBaseIds[0]"),
        ("CreateKnowledgeBaseBody", "chunkSize"),
        ("PresignBody", "fileSize"),
        ("CreateInvitationBody", "expiresInDays"),
        ("OrgSettingsBody", "settings.sidebarPinnedAppIds[0]"),
        ("OrgSettingsBody", "settings.defaultAgentId"),
        ("UpdateSkillBody", "expectedVersion"),
        ("ChatBody", "agentId"),
    } <= found
    assert len(found) >= 30


@pytest.mark.parametrize("disguise", DISGUISES, ids=repr)
def test_every_integer_field_refuses_an_integer_in_other_clothes(app, disguise):
    for body, path, least in integer_fields(app):
        wire = str(path[0])
        sent = placed(path, disguise.format(n=least))
        if getattr(body, "check", None) is not None:  # the domain's rules name nested fields
            refusal = body_refusal(body, sent)
            assert isinstance(refusal, Invalid), (body.__name__, path)
            assert dotted(path) in [d["field"] for d in refusal.details], (body.__name__, path)
            continue
        failure = decode_failures(body, sent).get(wire)
        assert failure == ("type", NOT_AN_INTEGER), (body.__name__, path, failure)
        error = body_error(body, {wire: failure})
        assert error.details == [{"field": wire, "message": NOT_AN_INTEGER}], (body.__name__, path)


def test_a_json_integer_in_the_same_place_is_taken(app):
    for body, path, least in integer_fields(app):
        sent = placed(path, str(least))
        if getattr(body, "check", None) is not None:
            assert body_refusal(body, sent) is None, (body.__name__, path)
        else:
            assert str(path[0]) not in decode_failures(body, sent), (body.__name__, path)


def test_a_fraction_is_still_told_by_the_fields_own_rule(app):
    from entrypoints.http.knowledge_base_schemas import UpdateKnowledgeBaseBody

    failures = decode_failures(UpdateKnowledgeBaseBody, b'{"kbId": 2.5}')
    assert failures["kbId"][0] == "type" and failures["kbId"][1] != NOT_AN_INTEGER
    error = body_error(UpdateKnowledgeBaseBody, failures)
    assert (error.message, error.details) == ("Valid knowledge base ID is required", [])
    # Out of the field's range, it is refused as the integer would be.
    assert decode_failures(UpdateKnowledgeBaseBody, b'{"kbId": 1, "chunkSize": 1.0}') == {
        "chunkSize": ("range", "Expected `int` >= 32")
    }


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"defaultAgentId": 2.0}, "settings.defaultAgentId"),
        ({"defaultAgentId": "2"}, "settings.defaultAgentId"),
        ({"sidebarPinnedAppIds": [1, 2.0]}, "settings.sidebarPinnedAppIds[1]"),
    ],
)
def test_the_settings_take_json_integers_only(settings, field):
    with pytest.raises(Invalid) as refused:
        parse_settings(settings)
    assert {"field": field, "message": NOT_AN_INTEGER} in refused.value.details
    assert (
        parse_settings({"defaultAgentId": 2, "sidebarPinnedAppIds": [1, 2]}).default_agent_id == 2
    )


@pytest.mark.parametrize(
    ("value", "disguised"),
    [
        (2.0, True),
        (1e3, True),
        ("2", True),
        (2, False),
        (2.5, False),
        (0.0, False),
        ("02", False),
        ("-2", False),
        (True, False),
        (None, False),
        (2.0**64, False),
    ],
)
def test_an_id_written_otherwise_is_told_apart(value, disguised):
    assert written_otherwise(value) is disguised
