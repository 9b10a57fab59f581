"""The JSON Schema of a search's `filters` (`domain.search.parse_filters`), shared by
`POST /kb/search` and the agents' `knowledgeFilters`."""

from __future__ import annotations

from typing import Any

from domain.search import (
    FILE_FIELDS,
    MAX_FILTER_DEPTH,
    MAX_IN_VALUES,
    MAX_KEY,
    MAX_STRING_VALUE,
    METADATA_PREFIX,
    OPERATORS,
)
from entrypoints.http.schemas import NO_NUL, NOT_BLANK


def _condition(
    key: dict[str, Any], value: dict[str, Any], ordered: dict[str, Any]
) -> dict[str, Any]:
    """`{key, op, value}` for keys of `key`, whose values are of `value` (`ordered` for the
    four comparisons), a list of 1 to 100 of them for `in` / `nin`."""
    operand = {"type": "array", "minItems": 1, "maxItems": MAX_IN_VALUES, "items": value}
    return {
        "type": "object",
        "required": ["key", "op", "value"],
        "additionalProperties": False,
        "properties": {"key": key, "op": {"enum": list(OPERATORS)}, "value": {}},
        "anyOf": [
            {"properties": {"op": {"enum": ["eq", "ne"]}, "value": value}},
            {"properties": {"op": {"enum": ["gt", "gte", "lt", "lte"]}, "value": ordered}},
            {"properties": {"op": {"enum": ["in", "nin"]}, "value": operand}},
        ],
    }


def filter_schema() -> dict[str, Any]:
    """`domain.search.parse_filters`'s rules as JSON Schema, the nesting unrolled to its
    limit; only the count of conditions in all is left to the description. Null is in it:
    Litestar puts the schema beside the optional field's `oneOf [object, null]`."""
    string = {"type": "string", "maxLength": MAX_STRING_VALUE, "pattern": NO_NUL}
    number = {"type": "number"}
    scalar = {"anyOf": [string, number, {"type": "boolean"}]}
    time = {"type": "string", "format": "date-time"}
    texts = [name for name, kind in FILE_FIELDS.items() if kind not in ("fileSize", "createdAt")]
    metadata_key = {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_KEY,
        "pattern": NOT_BLANK,
        "not": {"enum": [*FILE_FIELDS, METADATA_PREFIX]},
    }
    condition = {
        "anyOf": [
            _condition(metadata_key, scalar, {"anyOf": [string, number]}),
            _condition({"enum": texts}, string, string),
            _condition({"const": "fileSize"}, number, number),
            _condition({"const": "createdAt"}, time, time),
        ]
    }
    schema: dict[str, Any] = condition
    for _ in range(MAX_FILTER_DEPTH - 1):
        parts = {"type": "array", "minItems": 1, "items": schema}
        group = {
            "type": "object",
            "minProperties": 1,
            "maxProperties": 1,
            "additionalProperties": False,
            "patternProperties": {"^(and|or)$": parts},
        }
        schema = {"anyOf": [condition, group]}
    return {"anyOf": [*schema["anyOf"], {"type": "null"}]}


FILTERS_JSON_SCHEMA: dict[str, Any] = {"extra": filter_schema()}
"""For `Meta(extra_json_schema=...)` on a `dict[str, Any]` filters field."""
