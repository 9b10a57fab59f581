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


# Unicode 14's (Python 3.11's) controls (Cc), invisible format characters (Cf) and
# separators (Zs, Zl, Zp), as inclusive code point ranges. Written out rather than derived
# from `unicodedata` (a second at import), so that a rule and the OpenAPI pattern stating it
# are built from the same table; a unit test compares them with `unicodedata`.
CONTROLS = ((0x00, 0x1F), (0x7F, 0x9F))
FORMAT_CHARACTERS = (
    (0xAD, 0xAD),
    (0x600, 0x605),
    (0x61C, 0x61C),
    (0x6DD, 0x6DD),
    (0x70F, 0x70F),
    (0x890, 0x891),
    (0x8E2, 0x8E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x13438),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)
SEPARATORS = ((0x2028, 0x2029),)
SPACES = (
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
)
INVISIBLE = CONTROLS + FORMAT_CHARACTERS + SEPARATORS
"""What a name may not hold anywhere: controls, format characters, line separators."""


def character_class(*tables: tuple[tuple[int, int], ...]) -> str:
    """The inside of a regular expression's `[...]` matching every code point of `tables`,
    written so that Python's `re` and an ECMAScript pattern with the `u` flag read it alike
    (`\\uXXXX` escapes in the BMP, the characters themselves beyond it)."""

    def char(code: int) -> str:
        return f"\\u{code:04x}" if code <= 0xFFFF else chr(code)

    return "".join(
        char(low) if low == high else f"{char(low)}-{char(high)}"
        for table in tables
        for low, high in table
    )


def _matcher(*tables: tuple[tuple[int, int], ...]) -> re.Pattern[str]:
    return re.compile(f"[{character_class(*tables)}]")


_INVISIBLE = _matcher(INVISIBLE)
_INVISIBLE_OR_SPACE = _matcher(INVISIBLE, SPACES)


def has_invisible(value: str, *, spaces: bool = False) -> bool:
    """Whether `value` holds a control, format or separator character (with `spaces`, any
    space character too, the ASCII space included)."""
    return (_INVISIBLE_OR_SPACE if spaces else _INVISIBLE).search(value) is not None


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


def required(label: str) -> str:
    """The message for a required text that is absent or blank: `Name is required`."""
    return f"{label} is required"


def not_a_string(label: str) -> str:
    """The message for a text sent as another JSON type: `title must be a string`."""
    return f"{label} must be a string"


def too_long(label: str, limit: int) -> str:
    """The message for a text longer than `limit`: `Name must be at most 200 characters`."""
    return f"{label} must be at most {limit} characters"


def parse_line(
    value: object,
    *,
    field: str,
    limit: int,
    label: str | None = None,
    blank: tuple[str, str] | None = None,
) -> str:
    """A name or title: a string that is not blank, trimmed, at most `limit` characters, one
    line without control characters (`check_single_line`). `label` starts the messages
    (`Name is required`, `Name must be at most 200 characters`; the field's wire name by
    default); `blank` is the (message, detail) for a string that is blank, when it differs from
    the one for an absent value."""
    label = label or field
    if isinstance(value, str) and blank is not None and not value.strip():
        raise Invalid(blank[0], [field_error(field, blank[1])])
    if not isinstance(value, str) or not value.strip():
        raise Invalid(required(label), [field_error(field, "must be a non-empty string")])
    text = value.strip()
    if len(text) > limit:
        raise Invalid(too_long(label, limit), [field_error(field, "too long")])
    return check_single_line(text, field)


def parse_text(value: object, *, field: str, limit: int, label: str | None = None) -> str:
    """An optional free text (a description, instructions): a string of at most `limit`
    characters that PostgreSQL can store, trimmed; absent (None) means empty. `label` starts
    the messages (the field's wire name by default)."""
    if value is None:
        return ""
    label = label or field
    if not isinstance(value, str):
        raise Invalid(not_a_string(label), [field_error(field, "expected a string")])
    if len(value) > limit:
        raise Invalid(too_long(label, limit), [field_error(field, "too long")])
    return check_storable(value, field).strip()
