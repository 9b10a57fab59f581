"""Parsing of identifiers that arrive as untrusted input."""

from __future__ import annotations

import uuid

from domain.errors import Invalid

MAX_BIGINT = 2**63 - 1


def parse_positive_id(value: object, message: str) -> int:
    """A positive 64-bit integer id from an int or a string of digits; `Invalid(message)` else."""
    if isinstance(value, bool):
        raise Invalid(message)
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.strip().isdigit() and value.strip().isascii():
        number = int(value.strip())
    else:
        raise Invalid(message)
    if not 0 < number <= MAX_BIGINT:
        raise Invalid(message)
    return number


def parse_uuid(value: object, message: str) -> str:
    """A canonical lower-case uuid string; `Invalid(message)` for anything else."""
    if not isinstance(value, str):
        raise Invalid(message)
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        raise Invalid(message) from None
    return str(parsed)
