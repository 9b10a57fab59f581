"""The domain's conversation rules: titles, incoming messages, cursors."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from domain.conversations import (
    DEFAULT_TITLE,
    ConversationCursor,
    clean_generated_title,
    fallback_title,
    validate_list_limit,
    validate_messages,
    validate_title,
)
from domain.errors import Invalid


@pytest.mark.parametrize(
    ("value", "expected"),
    [("  Trip plans ", "Trip plans"), ("x" * 120, "x" * 120), ("Ünïcode ✓", "Ünïcode ✓")],
)
def test_valid_titles_are_trimmed(value, expected):
    assert validate_title(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("x" * 121, "title must be at most 120 characters"),
        ("", "title must not be empty"),
        ("   ", "title must not be empty"),
        ("a\nb", "title must be a single line"),
        ("a\rb", "title must be a single line"),
        ("a\u2028b", "title must be a single line"),
        ("tab\there", "title must not contain control characters"),
        ("nul\x00", "title must not contain control characters"),
        (42, "title must be a string"),
    ],
)
def test_invalid_titles(value, message):
    with pytest.raises(Invalid) as raised:
        validate_title(value)
    assert raised.value.message == message


def test_the_fallback_is_the_first_line_shortened_at_a_word():
    assert fallback_title("\n  Where is   the office?\nSecond line", []) == "Where is the office?"
    long = "Please summarise the attached quarterly report for the board meeting next week"
    title = fallback_title(long, [])
    assert title.endswith("…") and len(title) <= 60 and " " not in title[-2:]
    assert fallback_title("", ["report.pdf"]) == "report.pdf"
    assert fallback_title("", []) == DEFAULT_TITLE
    assert "\x07" not in fallback_title("bell\x07 ring", [])


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('"Holiday allowance"', "Holiday allowance"),
        ("Title: Holiday allowance.", "Holiday allowance"),
        ("## Trip plans\nmore text", "Trip plans"),
        ('"Lisbon trip".', "Lisbon trip"),
        ("\n\n  Budget review  ", "Budget review"),
        ("12", None),
        ("The conversation is with this assistant:", None),
        ("Sure, I'd be happy to help you with that. Here's a sample cover letter for", None),
        ("", None),
        ('""', None),
    ],
)
def test_generated_titles_are_cleaned_or_refused(answer, expected):
    assert clean_generated_title(answer) == expected


def test_the_message_sent_is_the_last_and_must_be_a_users():
    message = validate_messages(
        [
            {"role": "assistant", "parts": [{"type": "text", "text": "earlier"}]},
            {
                "role": "user",
                "parts": [
                    {"type": "text", "text": "Look at this"},
                    {
                        "type": "file",
                        "mediaType": "application/pdf",
                        "url": "data:,x",
                        "filename": "a.pdf",
                    },
                ],
            },
        ]
    )
    assert message.text == "Look at this"
    assert message.file_names == ["a.pdf"]
    with pytest.raises(Invalid, match="Unsupported part type"):
        validate_messages([{"role": "user", "parts": [{"type": "tool-result", "text": "x"}]}])
    with pytest.raises(Invalid, match="A file part needs a url"):
        validate_messages([{"role": "user", "parts": [{"type": "file", "mediaType": "a/b"}]}])


def test_cursors_round_trip_and_refuse_forgeries():
    cursor = ConversationCursor(
        updated_at=datetime(2026, 5, 1, 12, 0, tzinfo=UTC),
        thread_id="0b5b5a3e-55d3-4b5e-9a39-3f0c1f8f1f10",
    )
    assert ConversationCursor.decode(cursor.encode()) == cursor
    assert ConversationCursor.decode(None) is None
    for bad in ("nope", "x" * 300, 7):
        with pytest.raises(Invalid):
            ConversationCursor.decode(bad)


def test_list_limits():
    assert validate_list_limit(None) == 20
    assert validate_list_limit("100") == 100
    for bad in ("0", "101", "many"):
        with pytest.raises(Invalid):
            validate_list_limit(bad)


def test_compacting_a_stream_merges_the_deltas_of_one_text_part_only():
    from domain import chat_stream as cs

    chunks = [
        cs.start("m"),
        cs.text_start("a"),
        cs.text_delta("a", "Hel"),
        cs.text_delta("a", "lo"),
        cs.text_end("a"),
        cs.text_start("b"),
        cs.text_delta("b", "x"),
        cs.tool_input_start("c", "search"),
        cs.text_delta("b", "y"),
    ]
    assert cs.compact(chunks) == [
        cs.start("m"),
        cs.text_start("a"),
        cs.text_delta("a", "Hello"),
        cs.text_end("a"),
        cs.text_start("b"),
        cs.text_delta("b", "x"),
        cs.tool_input_start("c", "search"),
        cs.text_delta("b", "y"),
    ]
    assert chunks[2] == cs.text_delta("a", "Hel")
