"""Parsing of identifiers that arrive as untrusted input.

Only canonical forms are accepted: an integer id is an integer or a string of ASCII digits
(no sign, space or separator) of at most 2^63 - 1 (a JSON body holds JSON integers only: `2.0`
and `"2"` are refused there, `written_otherwise`); a uuid is the 8-4-4-4-12 hexadecimal form,
given back in lower case (the hexadecimal digits may arrive in either case, RFC 9562 §4).
Braces, `urn:uuid:`, missing dashes and surrounding spaces are refused. Lengths are checked
before any conversion, so a long string costs nothing.
"""

from __future__ import annotations

import re

from domain.errors import Invalid

MAX_BIGINT = 2**63 - 1
_DIGITS = re.compile(r"[1-9][0-9]{0,18}")  # canonical: no sign, no leading zero
NOT_A_JSON_INTEGER = "must be a JSON integer"
UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
"""The canonical 8-4-4-4-12 form (upper-case hex is accepted and answered in lower case)."""
_UUID = re.compile(UUID_PATTERN)


def parse_positive_id(value: object, message: str) -> int:
    """A positive 64-bit integer id from an int or a string of ASCII digits; `Invalid(message)`
    else."""
    if isinstance(value, bool):
        raise Invalid(message)
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _DIGITS.fullmatch(value):
        number = int(value)
    else:
        raise Invalid(message)
    if not 0 < number <= MAX_BIGINT:
        raise Invalid(message)
    return number


def written_otherwise(value: object) -> bool:
    """Whether `value` is a positive 64-bit integer written as something else than a JSON
    integer: an integral number with a fraction or an exponent (`2.0`, `2e0`) or a string of
    digits (`"2"`), which a JSON body may not hold for an id or a size (`NOT_A_JSON_INTEGER`)."""
    if isinstance(value, float):
        return value.is_integer() and 0 < value <= MAX_BIGINT
    return isinstance(value, str) and _DIGITS.fullmatch(value) is not None


def parse_uuid(value: object, message: str) -> str:
    """A uuid in the canonical 8-4-4-4-12 form, returned in lower case; `Invalid(message)` for
    anything else."""
    if not isinstance(value, str) or not _UUID.fullmatch(value):
        raise Invalid(message)
    return value.lower()
