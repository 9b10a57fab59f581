"""The vocabulary of the edge's validation (`validation`): who may use a route at all (its
`access`), a body field's rule (a request struct's `rules`), a parameter's rule (carried by the
parameter's declaration, `RuledQuery` and `RuledPath`), and the checks parameters share. Feature
modules and controllers declare their rules with it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from litestar.params import PathParameter, QueryParameter

from domain.errors import Invalid
from domain.identity import Caller
from domain.ids import parse_positive_id, parse_uuid
from domain.text import required, too_long

Kind = Literal["missing", "null", "empty", "type", "range"]
ANY: frozenset[Kind] = frozenset({"missing", "null", "empty", "type", "range"})
ABSENT: frozenset[Kind] = frozenset({"missing", "null", "empty"})
INVALID_BODY = "Invalid request body"
MALFORMED_BODY = "Malformed request body"
UNSUPPORTED_MEDIA_TYPE = "Unsupported Media Type"
UUID_INVALID = "must be a valid UUID"
ACCESS = "access"


def access(check: Callable[[Caller], None]) -> dict[str, Any]:
    """A route's (or a controller's) `opt` naming the role it needs, as the domain states it
    (`require_admin`, `require_agent_manager`, …): the edge checks the caller against it before
    the route's parameters and body, so that a caller who may not use the route at all gets 403
    whatever the request holds (the command's `parse` checks it again)."""
    return {ACCESS: check}


@dataclass(frozen=True, slots=True)
class Rule:
    """The message for a failing field (wire name), for the kinds of failure it covers;
    `detail` adds `details: [{field, message: detail}]` as the use case does."""

    field: str
    message: str
    kinds: frozenset[Kind] = ANY
    detail: str | None = None


RANGE: frozenset[Kind] = frozenset({"range"})
NULL_OR_EMPTY: frozenset[Kind] = frozenset({"null", "empty"})
TYPE: frozenset[Kind] = frozenset({"type"})


def required_rule(field: str, label: str, kinds: frozenset[Kind] = ABSENT) -> Rule:
    """A required text's rule, with the domain's message (`domain.text.required`)."""
    return Rule(field, required(label), kinds, "must be a non-empty string")


def too_long_rule(field: str, label: str, limit: int) -> Rule:
    """A bounded text's rule, with the domain's message (`domain.text.too_long`)."""
    return Rule(field, too_long(label, limit), RANGE, "too long")


def positive_id(raw: str) -> bool:
    """The domain's own rule (`parse_positive_id`): plain ASCII digits, 1 to 2^63-1."""
    try:
        parse_positive_id(raw, "")
    except Invalid:
        return False
    return True


def uuid(raw: str) -> bool:
    """The domain's own rule (`parse_uuid`): the canonical 8-4-4-4-12 form."""
    try:
        parse_uuid(raw, "")
    except Invalid:
        return False
    return True


def limit(top: int) -> Callable[[str], bool]:
    """Plain digits (surrounding spaces allowed) from 1 to `top`."""

    def valid(raw: str) -> bool:
        text = raw.strip()
        return text.isascii() and text.isdigit() and len(text) <= 9 and 1 <= int(text) <= top

    return valid


@dataclass(frozen=True, slots=True)
class ParamRule:
    """A query or path parameter's check of its raw text, and the error when it fails (or is
    absent and required): `message`, with `details: [{field, message: detail}]` when given."""

    message: str
    valid: Callable[[str], bool]
    detail: str | None = None


@dataclass(frozen=True)
class RuledQuery(QueryParameter):
    """A query parameter declared with the rule the edge checks its raw text by."""

    rule: ParamRule | None = None


@dataclass(frozen=True)
class RuledPath(PathParameter):
    """A path parameter declared with the rule the edge checks its raw text by."""

    rule: ParamRule | None = None
