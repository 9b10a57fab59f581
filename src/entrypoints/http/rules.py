"""The vocabulary of the edge's validation table (`validation`): a body field's rule, a
parameter's rule, and the checks parameters share. Feature modules declare their rows with it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from domain.errors import Invalid
from domain.ids import parse_positive_id, parse_uuid

Kind = Literal["missing", "null", "empty", "type", "range"]
ANY: frozenset[Kind] = frozenset({"missing", "null", "empty", "type", "range"})
ABSENT: frozenset[Kind] = frozenset({"missing", "null", "empty"})
INVALID_BODY = "Invalid request body"
MALFORMED_BODY = "Malformed request body"
UNSUPPORTED_MEDIA_TYPE = "Unsupported Media Type"
UUID_INVALID = "must be a valid UUID"


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
    def valid(raw: str) -> bool:
        text = raw.strip()
        return text.isascii() and text.isdigit() and len(text) <= 9 and 1 <= int(text) <= top

    return valid


@dataclass(frozen=True, slots=True)
class ParamRule:
    message: str
    valid: Callable[[str], bool]
    detail: str | None = None
