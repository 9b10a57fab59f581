"""A search's filters (`domain.search`) as a SQL condition over `knowledge_base_files f`.

Every value is a parameter (`Params.add`); the SQL holds only column names and operators that
come from this module. A metadata value is compared only with a value of its own JSON type: a
number with numbers, a string with strings, a boolean with booleans; a key the file lacks, or
holds with another type, is false for every operator but `ne` and `nin`, which it passes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from domain.search import Condition, Filter, Group

_COMPARISON = {"eq": "=", "ne": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_FIELD_COLUMNS = {
    "fileId": ("f.file_id::text", "text"),
    "fileName": ("f.file_name", "text"),
    "contentType": ("f.content_type", "text"),
    "fileSize": ("f.file_size", "numeric"),
    "createdAt": ("f.created_at", "timestamptz"),
}


class Params:
    """The statement's parameter values, numbered from `first`."""

    def __init__(self, first: int) -> None:
        self.values: list[Any] = []
        self._first = first

    def add(self, value: Any, cast: str) -> str:
        self.values.append(value)
        return f"${self._first + len(self.values) - 1}::{cast}"


def filter_sql(node: Filter, params: Params) -> str:
    """The condition for `node`, its values appended to `params`."""
    if isinstance(node, Group):
        joiner = " AND " if node.combine == "and" else " OR "
        return "(" + joiner.join(filter_sql(part, params) for part in node.parts) + ")"
    if node.field is not None:
        return _field(node, params)
    return _metadata(node, params)


def _field(node: Condition, params: Params) -> str:
    assert node.field is not None
    column, cast = _FIELD_COLUMNS[node.field]
    if node.op in ("in", "nin"):
        values = [_plain(v, cast) for v in node.value]  # type: ignore[union-attr]
        array = params.add(values, f"{cast}[]")
        test = f"{column} = ANY({array})"
        return f"({test})" if node.op == "in" else f"coalesce(NOT ({test}), true)"
    value = params.add(_plain(node.value, cast), cast)
    if node.op == "ne":
        return f"({column} IS DISTINCT FROM {value})"
    return f"({column} {_COMPARISON[node.op]} {value})"


def _plain(value: Any, cast: str) -> Any:
    if cast == "numeric":
        return value
    if cast == "timestamptz":
        assert isinstance(value, datetime)
        return value
    return str(value)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string"


def _metadata(node: Condition, params: Params) -> str:
    key = params.add(node.key, "text")
    member = f"(f.user_metadata -> {key})"
    if node.op in ("in", "nin"):
        tests = [_equal(member, item, params) for item in node.value]  # type: ignore[union-attr]
        any_of = "(" + " OR ".join(tests) + ")"
        return any_of if node.op == "in" else f"coalesce(NOT {any_of}, true)"
    if node.op == "eq":
        return _equal(member, node.value, params)
    if node.op == "ne":
        return f"coalesce(NOT {_equal(member, node.value, params)}, true)"
    kind = _kind(node.value)
    operator = _COMPARISON[node.op]
    if kind == "number":
        value = params.add(node.value, "numeric")
        typed = f"CASE WHEN jsonb_typeof({member}) = 'number' THEN ({member})::numeric END"
    else:
        value = params.add(str(node.value), "text")
        typed = f"CASE WHEN jsonb_typeof({member}) = 'string' THEN {member} #>> '{{}}' END"
    return f"coalesce({typed} {operator} {value}, false)"


def _equal(member: str, value: Any, params: Params) -> str:
    # jsonb equality compares type and value (1 = 1.0, "1" <> 1), and NULL for a missing key.
    return f"coalesce({member} = to_jsonb({params.add(value, _jsonb_cast(value))}), false)"


def _jsonb_cast(value: Any) -> str:
    kind = _kind(value)
    return {"boolean": "boolean", "number": "numeric", "string": "text"}[kind]
