"""Rules every text the service stores follows, whatever field it arrives in.

PostgreSQL cannot store NUL (U+0000) in `text` nor `\\u0000` in `jsonb`, and UTF-8 cannot
encode an unpaired surrogate: a value holding either is refused here, as a 400 naming its
field, before it reaches a repository. Names and titles are shown on one line in lists, so
they also refuse line breaks, control characters and the bidirectional embeddings, overrides
and isolates (U+202A to U+202E, U+2066 to U+2069) that make a name display as something else.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

from domain.errors import Invalid, field_error

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
LINE_BREAKS = frozenset("\n\r\u2028\u2029")


def is_storable(value: str) -> bool:
    """Whether PostgreSQL can store `value`: no NUL character, no unpaired surrogate."""
    return _UNSTORABLE.search(value) is None


def check_storable(value: str, field: str) -> str:
    """`value` unchanged when PostgreSQL can store it; `Invalid` naming `field` when it holds a
    NUL character or an unpaired surrogate."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return value
    if found.group() == "\x00":
        raise Invalid(
            f"{field} must not contain NUL characters",
            [field_error(field, "contains a NUL character")],
        )
    raise Invalid(
        f"{field} must be valid Unicode text",
        [field_error(field, "contains an unpaired surrogate")],
    )


def check_storable_json(value: object, field: str) -> None:
    """Every string of a JSON value, object keys included, follows `check_storable`; `field`
    is named for any of them. Walks without recursion, so depth costs no stack."""
    pending: list[object] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            check_storable(item, field)
        elif isinstance(item, Mapping):
            for key, inner in item.items():
                if isinstance(key, str):
                    check_storable(key, field)
                pending.append(inner)
        elif isinstance(item, list | tuple):
            pending.extend(item)


def is_display_control(char: str) -> bool:
    """A control character (Unicode category Cc) or a bidirectional formatting control."""
    return char in BIDI_CONTROLS or unicodedata.category(char) == "Cc"


def check_single_line(value: str, field: str) -> str:
    """`value` unchanged when it is one line without control characters or bidirectional
    controls (see the module's note); `Invalid` naming `field` otherwise."""
    if any(c in LINE_BREAKS for c in value):
        raise Invalid(f"{field} must be a single line", [field_error(field, "contains a newline")])
    if any(is_display_control(c) for c in value):
        raise Invalid(
            f"{field} must not contain control characters",
            [field_error(field, "contains a control character")],
        )
    return check_storable(value, field)
