"""Reading real-world mail: odd and wrong charsets, quoted display names with commas and
encoded words, encoded subjects, nested multiparts, inline parts against attachments."""

from __future__ import annotations

import base64

import pytest

from adapters.email.html_text import html_to_text
from adapters.email.mime import decode_bytes, header_text, parse_message
from domain.errors import Invalid
from domain.inbound_email import (
    ParsedEmail,
    body_file_name,
    file_name_for,
    message_key,
    recipient_candidates,
)


def raw(*lines: str | bytes) -> bytes:
    return b"\r\n".join(line.encode() if isinstance(line, str) else line for line in lines)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_an_unknown_8bit_body_is_read_as_utf8_then_windows_1252():
    parsed = parse_message(
        raw(
            "From: a@x.test",
            "To: kb@in.test",
            "Subject: t",
            'Content-Type: text/plain; charset="unknown-8bit"',
            "Content-Transfer-Encoding: 8bit",
            "",
            b"Caf\xe9 cr\xe8me",
        )
    )
    assert parsed.body == "Café crème"


def test_x_mac_roman_is_known_under_its_python_name():
    parsed = parse_message(
        raw(
            "From: a@x.test",
            "Subject: =?x-mac-roman?q?Caf=8E?=",
            "Content-Type: text/plain; charset=x-mac-roman",
            "Content-Transfer-Encoding: 8bit",
            "",
            b"Cr\x8fme br\x9el\x8ee",
        )
    )
    assert parsed.subject == "Café"
    assert parsed.body == "Crème brûlée"


def test_utf8_bytes_labelled_latin1_are_read_as_utf8():
    parsed = parse_message(
        raw(
            "From: a@x.test",
            'Content-Type: text/plain; charset="iso-8859-1"',
            "Content-Transfer-Encoding: 8bit",
            "",
            "Grüße aus Köln".encode(),
        )
    )
    assert parsed.body == "Grüße aus Köln"


def test_raw_8bit_header_bytes_are_decoded_not_left_as_surrogates():
    parsed = parse_message(raw(b"Subject: R\xe9union \xc3\xa0 9h", "From: a@x.test", "", "x"))
    assert parsed.subject.startswith("Réunion ")
    assert not any("\ud800" <= c <= "\udfff" for c in parsed.subject)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("=?utf-8?q?Quarterly_report_=E2=80=94_Q3?=", "Quarterly report — Q3"),
        ("=?iso-8859-1?b?" + b64("Réunion".encode("latin-1")) + "?=", "Réunion"),
        ("Re: =?utf-8?q?Caf=C3=A9?= =?utf-8?q?_au_lait?=", "Re: Café au lait"),
        ("=?unknown-8bit?q?caf=E9?=", "café"),
        ("=?utf-8?q?broken", "=?utf-8?q?broken"),
        ("line\r\n\tfolded", "line folded"),
    ],
)
def test_encoded_subjects(header, expected):
    assert header_text(header) == expected


def test_quoted_display_names_with_commas_and_encoded_words_keep_their_addresses():
    parsed = parse_message(
        raw(
            'From: "=?utf-8?q?M=C3=BCller=2C_Hans?=" <hans@x.test>',
            'To: "Doe, John" <john@x.test>, =?utf-8?q?J=C3=BCrgen?= <KB-ABC@In.Test>',
            'Cc: "Team, All, Of Us" <team@x.test>',
            "Delivered-To: kb-first@in.test",
            "X-Original-To: <kb-second@in.test>",
            "",
            "hi",
        )
    )
    assert parsed.sender == '"Müller, Hans" <hans@x.test>'
    assert parsed.recipients == [
        "kb-first@in.test",
        "kb-second@in.test",
        "john@x.test",
        "KB-ABC@In.Test",
        "team@x.test",
    ]
    assert recipient_candidates(None, parsed)[3] == "kb-abc@in.test"
    assert recipient_candidates(" <KB-X@In.Test> ", parsed) == ["kb-x@in.test"]


def test_a_malformed_address_list_still_yields_what_it_can():
    parsed = parse_message(raw('To: "unterminated <kb-1@in.test>, , @@, kb-2@in.test', "", "x"))
    assert "kb-2@in.test" in recipient_candidates(None, parsed)


def test_nested_multiparts_inline_parts_and_attachments():
    pdf = b"%PDF-1.4 tiny"
    logo = b"\x89PNG logo"
    message = raw(
        "From: a@x.test",
        "Subject: Report",
        "Message-ID: <r1@x.test>",
        "MIME-Version: 1.0",
        'Content-Type: multipart/mixed; boundary="outer"',
        "",
        "--outer",
        'Content-Type: multipart/related; boundary="related"',
        "",
        "--related",
        'Content-Type: multipart/alternative; boundary="alt"',
        "",
        "--alt",
        "Content-Type: text/plain; charset=utf-8",
        "",
        "The plain body.",
        "--alt",
        "Content-Type: text/html; charset=utf-8",
        "",
        "<p>The <b>HTML</b> body.</p>",
        "--alt--",
        "--related",
        "Content-Type: image/png",
        "Content-Disposition: inline",
        "Content-ID: <logo>",
        "Content-Transfer-Encoding: base64",
        "",
        b64(logo),
        "--related--",
        "--outer",
        "Content-Type: application/pdf",
        "Content-Disposition: attachment; filename*=utf-8''r%C3%A9sum%C3%A9.pdf",
        "Content-Transfer-Encoding: base64",
        "",
        b64(pdf),
        "--outer",
        'Content-Type: multipart/mixed; boundary="inner"',
        "",
        "--inner",
        "Content-Type: text/csv",
        'Content-Disposition: attachment; filename="..\\\\..\\\\data.csv"',
        "",
        "a,b",
        "--inner--",
        "--outer",
        "Content-Type: message/rfc822",
        "",
        "From: b@x.test",
        "Subject: Forwarded",
        "",
        "Forwarded text.",
        "--outer--",
    )
    parsed = parse_message(message)
    assert parsed.body.strip() == "The plain body."
    assert parsed.message_id == "<r1@x.test>"
    names = [a.file_name for a in parsed.attachments]
    assert names == ["résumé.pdf", "..\\..\\data.csv", "Forwarded.md"]
    assert parsed.attachments[0].data == pdf
    assert logo not in [a.data for a in parsed.attachments], "inline in the body: not a file"
    assert file_name_for(names[1], "x") == "data.csv"
    assert b"Forwarded text." in parsed.attachments[2].data


def test_an_inline_image_beside_the_body_in_mixed_is_an_attachment():
    message = raw(
        "From: a@x.test",
        'Content-Type: multipart/mixed; boundary="b"',
        "",
        "--b",
        "Content-Type: text/plain",
        "",
        "See photo",
        "--b",
        "Content-Type: image/jpeg",
        "Content-Disposition: inline",
        "Content-Transfer-Encoding: base64",
        "",
        b64(b"\xff\xd8jpeg"),
        "--b--",
    )
    parsed = parse_message(message)
    assert parsed.body.strip() == "See photo"
    assert [(a.file_name, a.content_type) for a in parsed.attachments] == [
        ("attachment-1.jpg", "image/jpeg")
    ]


def test_an_html_only_body_becomes_text():
    parsed = parse_message(
        raw(
            "From: a@x.test",
            "Content-Type: text/html; charset=utf-8",
            "",
            "<html><head><style>p{}</style><title>T</title></head><body><h1>Hello</h1>"
            "<p>First &amp; second</p><script>alert(1)</script><ul><li>one</li></ul></body>",
        )
    )
    assert parsed.body == "Hello\n\nFirst & second\n\n- one"


def test_a_single_part_attachment_message_is_its_own_attachment():
    parsed = parse_message(
        raw(
            "From: a@x.test",
            "Content-Type: application/pdf; name=scan.pdf",
            "Content-Transfer-Encoding: base64",
            "",
            b64(b"%PDF-1.7"),
        )
    )
    assert parsed.body == ""
    assert [(a.file_name, a.data) for a in parsed.attachments] == [("scan.pdf", b"%PDF-1.7")]


@pytest.mark.parametrize("data", [b"", b"no headers at all", b"\x00\xff\x00binary", b"\r\n\r\nx"])
def test_what_has_no_header_does_not_parse(data):
    with pytest.raises(Invalid, match="could not be parsed"):
        parse_message(data)


def test_a_message_id_key_and_its_fallbacks():
    email = ParsedEmail(
        message_id="<a@b>", subject="", sender="", date=None, recipients=[], body="", digest="d"
    )
    assert message_key(email) == "<a@b>"
    assert message_key(ParsedEmail(**{**_fields(email), "message_id": None})) == "sha256:d"
    long_id = "<" + "x" * 600 + "@b>"
    assert message_key(ParsedEmail(**{**_fields(email), "message_id": long_id})).startswith(
        "sha256:"
    )


def _fields(email: ParsedEmail) -> dict:
    return {name: getattr(email, name) for name in ParsedEmail.__dataclass_fields__}


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        ("Quarterly report", "Quarterly report.md"),
        ("", "message.md"),
        ("a/b\\c: d", "c: d.md"),
        ("  ..  ", "message.md"),
        ("notes.md", "notes.md"),
        ("x" * 300, "x" * 252 + ".md"),
        ("tab\tand\u202enewline\n", "tab andnewline.md"),
    ],
)
def test_the_body_file_name(subject, expected):
    assert body_file_name(subject) == expected


def test_charset_decoding_never_fails():
    assert decode_bytes(b"\x81\x8d\x8f", "no-such-charset")
    assert decode_bytes("héllo".encode("utf-16"), "utf-16") == "héllo"
    assert decode_bytes(b"plain", None) == "plain"


def test_html_to_text_is_linear_and_drops_hidden_content():
    assert html_to_text("<div>a<br>b</div><noscript>x</noscript>") == "a\nb"
