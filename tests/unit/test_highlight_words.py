"""`_words_starting`: the candidate words of a passage's highlights, found with `str.find`,
agree with a plain scan of its words, whatever their case or script."""

from __future__ import annotations

import pytest

from adapters.postgres.hybrid_search import WORD, _words_starting


def scanned(passage: str, starts: set[str]) -> list[tuple[int, int, str]]:
    return [
        (m.start(), m.end(), m.group().lower())
        for m in WORD.finditer(passage)
        if any(m.group().lower().startswith(s) for s in starts)
    ]


@pytest.mark.parametrize(
    "passage",
    [
        "Similar laws: SIMILARITY of models, a simulation.",
        "x_sim sim_x 3sim sim, (sim) sim.sim",
        "İstanbul Similar",  # İ lower-cases to two characters: offsets must not shift
        "\uff33\uff29\uff2d full-width and \ufb01ne ligatures",
        "",
        "sim",
    ],
)
def test_the_words_found_are_those_a_scan_finds(passage):
    starts = {"sim", "law", "x", "mod"}

    assert _words_starting(passage, starts) == scanned(passage, starts)


def test_no_starts_find_nothing():
    assert _words_starting("any words at all", set()) == []
