"""What a search may ask besides its query: filters over the files' fields and metadata (the
shape of OpenAI's vector-store search filters), and the highlights of its results."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from domain.errors import Invalid, field_error

Operator = Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"]
OPERATORS: tuple[Operator, ...] = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin")
MAX_FILTER_DEPTH = 5
"""How deeply `and` / `or` groups may nest (a lone condition is depth 1)."""
MAX_FILTER_CONDITIONS = 50
MAX_IN_VALUES = 100
MAX_KEY = 200
MAX_STRING_VALUE = 1000
FILTERS_INVALID = "filters are invalid"
METADATA_PREFIX = "userMetadata."

FileField = Literal["fileId", "fileName", "contentType", "fileSize", "createdAt"]
FILE_FIELDS: dict[str, FileField] = {
    "fileId": "fileId",
    "fileName": "fileName",
    "contentType": "contentType",
    "fileSize": "fileSize",
    "createdAt": "createdAt",
}
"""The file's own fields a filter may name; any other key is a key of its `userMetadata`
(`userMetadata.<key>` names a metadata key even when it is one of these names)."""

Scalar = str | int | float | bool
Value = Scalar | datetime | tuple[Scalar | datetime, ...]


@dataclass(frozen=True, slots=True)
class Condition:
    """`key op value`: over the file field `field`, or over `userMetadata[key]` (`field` None).
    A metadata key the file lacks, or holds a value of another type, matches only `ne` / `nin`."""

    key: str
    op: Operator
    value: Value
    field: FileField | None = None


@dataclass(frozen=True, slots=True)
class Group:
    """All (`and`) or any (`or`) of its parts."""

    combine: Literal["and", "or"]
    parts: tuple[Filter, ...]


Filter = Condition | Group


def _invalid(message: str) -> Invalid:
    return Invalid(f"{FILTERS_INVALID}: {message}", [field_error("filters", message)])


def parse_filters(value: object) -> Filter | None:
    """`{key, op, value}` or `{and: [...]}` / `{or: [...]}`, nested at most 5 deep with at most
    50 conditions in all; null or absent is no filter. Values: a string, a number or a boolean
    for `eq` / `ne`; a number, a string or (for `createdAt`) an ISO 8601 time for the four
    comparisons; a list of 1 to 100 such scalars for `in` / `nin`. A file field takes only its
    own type (`fileSize` numbers, `createdAt` times, the others strings)."""
    if value is None:
        return None
    count = [0]
    return _node(value, 1, count)


def _node(value: object, depth: int, count: list[int]) -> Filter:
    if depth > MAX_FILTER_DEPTH:
        raise _invalid(f"nested more than {MAX_FILTER_DEPTH} deep")
    if not isinstance(value, dict):
        raise _invalid("each filter is an object")
    groups = [name for name in ("and", "or") if name in value]
    if groups:
        if len(value) != 1:
            raise _invalid('a group has one key, "and" or "or"')
        combine: Literal["and", "or"] = "and" if groups[0] == "and" else "or"
        parts = value[combine]
        if not isinstance(parts, list) or not parts:
            raise _invalid(f'"{combine}" takes a non-empty list of filters')
        return Group(combine, tuple(_node(part, depth + 1, count) for part in parts))
    count[0] += 1
    if count[0] > MAX_FILTER_CONDITIONS:
        raise _invalid(f"more than {MAX_FILTER_CONDITIONS} conditions")
    return _condition(value)


def _condition(value: dict[object, object]) -> Condition:
    if set(value) != {"key", "op", "value"}:
        raise _invalid('a condition has exactly "key", "op" and "value"')
    key, op, operand = value["key"], value["op"], value["value"]
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY:
        raise _invalid(f"key must be a non-empty string of at most {MAX_KEY} characters")
    if "\x00" in key:
        raise _invalid("a key holds no NUL character")
    if op not in OPERATORS:
        raise _invalid(f"unknown operator {str(op)[:40]!r}: one of {', '.join(OPERATORS)}")
    field = None if key.startswith(METADATA_PREFIX) else FILE_FIELDS.get(key)
    name = key.removeprefix(METADATA_PREFIX) if key.startswith(METADATA_PREFIX) else key
    if not name:
        raise _invalid("key names no metadata key")
    operator: Operator = op
    if operator in ("in", "nin"):
        if not isinstance(operand, list) or not 1 <= len(operand) <= MAX_IN_VALUES:
            raise _invalid(f'"{operator}" takes a list of 1 to {MAX_IN_VALUES} values')
        items = tuple(_scalar(item, field, key, operator) for item in operand)
        return Condition(name, operator, items, field)
    return Condition(name, operator, _scalar(operand, field, key, operator), field)


def _scalar(value: object, field: FileField | None, key: str, op: Operator) -> Scalar | datetime:
    ordered = op in ("gt", "gte", "lt", "lte")
    if field == "createdAt":
        return _time(value, key)
    if field == "fileSize":
        if not _is_number(value):
            raise _invalid(f"{key} compares with a number")
        return value  # type: ignore[return-value]
    if field is not None:
        if not isinstance(value, str):
            raise _invalid(f"{key} compares with a string")
        return _string(value, key)
    if isinstance(value, bool):
        if ordered:
            raise _invalid(f'"{op}" compares numbers or strings, not booleans')
        return value
    if _is_number(value):
        return value  # type: ignore[return-value]
    if isinstance(value, str):
        return _string(value, key)
    raise _invalid(f"{key}: a value is a string, a number or a boolean")


def _is_number(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value)


def _string(value: str, key: str) -> str:
    if len(value) > MAX_STRING_VALUE or "\x00" in value:
        raise _invalid(f"{key}: a string value has at most {MAX_STRING_VALUE} characters")
    return value


def _time(value: object, key: str) -> datetime:
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed
    raise _invalid(f"{key} compares with an ISO 8601 time with its offset")


@dataclass(frozen=True, slots=True)
class Highlight:
    """Where one of the query's terms (a word whose stem is one of the query's) stands in a
    result's text: `start` to `end` (exclusive), in characters."""

    start: int
    end: int
