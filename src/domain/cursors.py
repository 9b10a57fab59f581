"""Opaque page cursors: a short JSON list, base64url without padding. Only the service makes
them; anything else handed back is a 400 "cursor is not valid"."""

from __future__ import annotations

import base64
import binascii
import json
from json.encoder import encode_basestring_ascii
from typing import Any

from domain.errors import Invalid, field_error

CURSOR_INVALID = "cursor is not valid"


def invalid_cursor() -> Invalid:
    return Invalid(CURSOR_INVALID, [field_error("cursor", "malformed")])


_ENCODER = json.JSONEncoder(separators=(",", ":"))


def encode_cursor(parts: list[Any]) -> str:
    """The cursor holding `parts` (JSON values)."""
    raw = "[" + ",".join([_encode_part(part) for part in parts]) + "]"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _encode_part(part: Any) -> str:
    # What `json.dumps(part, separators=(",", ":"))` writes; the strings and integers every
    # cursor is made of are written without building an encoder per call (a page's cursor is
    # on every page request's path).
    if type(part) is str:
        return encode_basestring_ascii(part)
    if type(part) is int:
        return str(part)
    return _ENCODER.encode(part)


def decode_cursor(value: object, *, longest: int = 200) -> list[Any]:
    """The parts of a cursor `encode_cursor` made; `invalid_cursor()` for anything else."""
    if not isinstance(value, str) or len(value) > longest:
        raise invalid_cursor()
    try:
        parts = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise invalid_cursor() from None
    if not isinstance(parts, list):
        raise invalid_cursor()
    return parts
