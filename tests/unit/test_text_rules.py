"""The written-out Unicode tables behind the text rules and the OpenAPI patterns."""

from __future__ import annotations

import re
import unicodedata

from domain.text import (
    CONTROLS,
    FORMAT_CHARACTERS,
    INVISIBLE,
    SEPARATORS,
    SPACES,
    character_class,
    has_invisible,
)


def _ranges(categories: set[str]) -> set[int]:
    return {
        code
        for code in range(0x110000)
        if not 0xD800 <= code <= 0xDFFF and unicodedata.category(chr(code)) in categories
    }


def _expand(*tables: tuple[tuple[int, int], ...]) -> set[int]:
    return {code for table in tables for low, high in table for code in range(low, high + 1)}


def test_the_written_out_tables_are_this_pythons_unicode_categories():
    assert _expand(CONTROLS) == _ranges({"Cc"})
    assert _expand(FORMAT_CHARACTERS) == _ranges({"Cf"})
    assert _expand(SEPARATORS) == _ranges({"Zl", "Zp"})
    assert _expand(SPACES) == _ranges({"Zs"})


def test_a_character_class_matches_exactly_its_tables():
    matcher = re.compile(f"[{character_class(INVISIBLE)}]")
    for code in (0x0, 0x1F, 0x7F, 0xAD, 0x200B, 0x202E, 0x2028, 0xFEFF, 0x110BD, 0xE007F):
        assert matcher.fullmatch(chr(code)), hex(code)
    for code in (0x20, 0xA0, 0x41, 0xE9, 0x1F600, 0x3000):
        assert not matcher.fullmatch(chr(code)), hex(code)
    assert has_invisible("a b", spaces=True) and not has_invisible("a b")
    assert has_invisible("a\u3000b", spaces=True)
