"""Small shared values, and how a request's fields become parsed values.

A feature lists its fields' parsers in the order the specification checks them (the first
failing field names the error); `parse_all` builds a new resource's fields from them and
`parse_sent` the changes a request makes. Both refuse a field the feature does not know, so
that an edge and the domain cannot drift apart silently.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from enum import Enum
from typing import Any, ClassVar, Protocol


class DataclassInstance(Protocol):
    """Any dataclass instance (what `dataclasses.fields` reads)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


class Unset(Enum):
    """Marks an optional field the caller did not send, as distinct from an explicit null."""

    UNSET = "UNSET"


UNSET = Unset.UNSET

Parser = Callable[[object], Any]
"""One field's constructor: the raw value (None when absent) to the parsed one, or `Invalid`."""
Check = Callable[[Mapping[str, Any]], object]
"""A rule across fields, given the values parsed so far; `Invalid` when they break it."""


def _known(parsers: Mapping[str, Parser], raw: Mapping[str, object]) -> None:
    unknown = set(raw) - set(parsers)
    if unknown:
        raise TypeError(f"unknown fields: {', '.join(sorted(unknown))}")


def parse_all(
    parsers: Mapping[str, Parser],
    raw: Mapping[str, object],
    *,
    then: Mapping[str, Check] | None = None,
) -> dict[str, Any]:
    """Every field of `parsers`, in their order, parsed from `raw`; one absent or not sent is
    parsed as null (its parser gives its default or refuses it). `then` names the rules across
    fields to check as soon as a field is parsed, with the values parsed so far."""
    _known(parsers, raw)
    values: dict[str, Any] = {}
    for name, parse in parsers.items():
        value = raw.get(name)
        values[name] = parse(None if value is UNSET else value)
        if then and name in then:
            then[name](values)
    return values


def parse_sent(parsers: Mapping[str, Parser], raw: Mapping[str, object]) -> dict[str, Any]:
    """The fields of `raw` that were sent (present and not `UNSET`), each parsed by its parser,
    in the order of `parsers`."""
    _known(parsers, raw)
    return {
        name: parse(raw[name])
        for name, parse in parsers.items()
        if name in raw and raw[name] is not UNSET
    }


def sent_values(changes: DataclassInstance) -> dict[str, Any]:
    """A dataclass of changes as a mapping of the fields that were sent (not `UNSET`)."""
    return {
        f.name: getattr(changes, f.name)
        for f in fields(changes)
        if getattr(changes, f.name) is not UNSET
    }


def field_values(values: DataclassInstance) -> dict[str, Any]:
    """A dataclass's fields as a mapping, by name (no deep copy)."""
    return {f.name: getattr(values, f.name) for f in fields(values)}
