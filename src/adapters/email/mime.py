"""Raw RFC 822 messages read with the standard library's `email` package (`policy.default`:
the legacy `compat32` policy has no `iter_attachments`).

Real mail is often wrong, so nothing here trusts a label: a charset Python does not know
(`unknown-8bit`, `x-mac-roman`) or one that does not fit the bytes falls back to UTF-8, then
Windows-1252; 8-bit bytes in headers (which the parser keeps as surrogate escapes) are decoded
the same way; encoded words are decoded one by one with that fallback; address lists are read
by the policy's parser, which keeps quoted display names with commas whole, and by
`getaddresses` when that parser gives up.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import email
import email.policy
import hashlib
import mimetypes
import re
from collections.abc import Iterator
from email.header import decode_header
from email.message import EmailMessage, Message, MIMEPart
from email.utils import getaddresses, parsedate_to_datetime
from typing import Any

from adapters.email.html_text import html_to_text
from domain.errors import Invalid, field_error
from domain.inbound_email import (
    MALFORMED_MESSAGE,
    EmailPart,
    ParsedEmail,
    body_markdown,
    clean_header,
)

RECIPIENT_HEADERS = ("Delivered-To", "X-Original-To", "To", "Cc")
MAX_DEPTH = 8
_MESSAGE_ID = re.compile(r"<[^<>\s]+>")
_ADDRESS_LIKE = re.compile(r"[^\s<>\"',;:()\[\]]+@[^\s<>\"',;:()\[\]]+")
_TOKEN = re.compile(r"^[A-Za-z0-9._-]{1,40}$")
_WIDE = ("utf-16", "utf-32")


def decode_bytes(data: bytes, charset: str | None) -> str:
    """Text from bytes of a declared but untrusted charset: a UTF-16 or UTF-32 label is taken
    at its word; otherwise bytes that are valid UTF-8 are UTF-8 (a mislabelled UTF-8 message is
    far more common than Latin-1 text that happens to be valid UTF-8), then the declared
    charset when Python knows it, then Windows-1252 with replacement. Never fails."""
    codec = _codec(charset)
    if codec is not None and codec.startswith(_WIDE):
        try:
            return data.decode(codec)
        except UnicodeDecodeError:
            pass
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if codec is not None:
        try:
            return data.decode(codec)
        except UnicodeDecodeError:
            pass
    return data.decode("cp1252", errors="replace")


def _codec(charset: str | None) -> str | None:
    if not charset:
        return None
    label = charset.strip().strip('"').lower()
    for candidate in (label, label.removeprefix("x-"), label.removeprefix("x-").replace("-", "_")):
        try:
            return codecs.lookup(candidate).name
        except (LookupError, ValueError):
            continue
    return None


def unescape(value: str) -> str:
    """A header as the parser left it, with its raw 8-bit bytes (kept as surrogate escapes)
    decoded as `decode_bytes` does."""
    if not any("\udc80" <= c <= "\udcff" for c in value):
        return value
    return decode_bytes(value.encode("utf-8", "surrogateescape"), None)


def header_text(raw: str | None) -> str:
    """A header's text: encoded words decoded one by one, each in its own charset."""
    if raw is None:
        return ""
    value = unescape(str(raw))
    try:
        parts = decode_header(value)
    except Exception:  # a malformed encoded word: keep the text as sent
        return clean_header(value)
    text = "".join(
        chunk
        if isinstance(chunk, str)
        else chunk.decode("raw-unicode-escape")
        if charset is None
        else decode_bytes(chunk, charset)
        for chunk, charset in parts
    )
    return clean_header(text)


class StdlibEmailParser:
    """`EmailParser` on Python's `email` package, in a worker thread: decoding a message's
    attachments takes a while for large ones."""

    async def parse(self, raw: bytes) -> ParsedEmail:
        return await asyncio.to_thread(parse_message, raw)


def parse_message(raw: bytes) -> ParsedEmail:
    """The message read from `raw`; `Invalid(MALFORMED_MESSAGE)` when it is not one."""
    try:
        message = email.message_from_bytes(raw, policy=email.policy.default)
        if not isinstance(message, EmailMessage) or not _has_headers(message):
            raise ValueError("no header")
        return _read(message, hashlib.sha256(raw).hexdigest())
    except Exception as error:  # whatever the email package chokes on does not parse
        raise Invalid(MALFORMED_MESSAGE, [field_error("body", _reason(error))]) from None


def _reason(error: Exception) -> str:
    if isinstance(error, RecursionError):
        return "nested too deeply"
    if str(error) == "no header":
        return "no header fields before the body"
    return "not a readable MIME message"


def _has_headers(message: EmailMessage) -> bool:
    """Whether the bytes began with header fields: a message with none (any other text or
    bytes) does not parse."""
    return bool(message.keys())


def _raw(message: Message, name: str) -> list[str]:
    return [str(value) for key, value in message.raw_items() if key.lower() == name.lower()]


def _first(message: Message, name: str) -> str | None:
    return next(iter(_raw(message, name)), None)


def _read(message: EmailMessage, digest: str) -> ParsedEmail:
    body, attachments = _contents(message, 0)
    return _described(message, body, attachments, _recipients(message), digest)


def _described(
    message: Message,
    body: str,
    attachments: list[EmailPart] | None = None,
    recipients: list[str] | None = None,
    digest: str = "",
) -> ParsedEmail:
    return ParsedEmail(
        message_id=_message_id(_first(message, "Message-ID")),
        subject=header_text(_first(message, "Subject")),
        sender=header_text(_first(message, "From")),
        date=_date(_first(message, "Date")),
        recipients=recipients or [],
        body=body,
        attachments=attachments or [],
        digest=digest,
    )


def _message_id(raw: str | None) -> str | None:
    if raw is None:
        return None
    value = unescape(raw)
    found = _MESSAGE_ID.search(value)
    text = found.group() if found else clean_header(value)
    return clean_header(text) or None


def _date(raw: str | None) -> str | None:
    if raw is None:
        return None
    text = clean_header(unescape(raw))
    try:
        return parsedate_to_datetime(text).isoformat()
    except (TypeError, ValueError, IndexError, OverflowError):
        return text or None


def _recipients(message: EmailMessage) -> list[str]:
    """The addresses of Delivered-To, X-Original-To, To and Cc, in that order."""
    found: list[str] = []
    for name in RECIPIENT_HEADERS:
        for raw in _raw(message, name):
            found.extend(_addresses(message, name, raw))
    return list(dict.fromkeys(found))


def _addresses(message: EmailMessage, name: str, raw: str) -> list[str]:
    """The header's addresses by the policy's parser, then by `getaddresses`, then anything
    shaped like an address: a malformed list (an unterminated quote swallows the rest) still
    yields its addresses, and only a knowledge base's own address can match anyway."""
    value = unescape(raw)
    addresses: list[str] = []
    with contextlib.suppress(Exception):  # the policy's parser has known failures
        header: Any = message.policy.header_factory(name, value)  # type: ignore[attr-defined]
        addresses = [a.addr_spec for a in getattr(header, "addresses", ())]
    addresses += [address for _, address in getaddresses([value]) if address]
    return addresses + _ADDRESS_LIKE.findall(value)


def _contents(message: EmailMessage, depth: int) -> tuple[str, list[EmailPart]]:
    """The message's body text and its attachments, those of attached messages included."""
    if depth > MAX_DEPTH:
        raise RecursionError
    if not message.is_multipart() and message.get_content_maintype() not in ("text", "message"):
        return "", [_part(message, 1)]
    body_part = message.get_body(preferencelist=("plain", "html"))
    body = _text_of(body_part) if body_part is not None else ""
    attachments: list[EmailPart] = []
    for part in _attachments(message):
        if part.get_content_type() == "message/rfc822":
            attachments.extend(_attached_message(part, depth))
        else:
            attachments.append(_part(part, len(attachments) + 1))
    return body, attachments


def _attachments(message: EmailMessage) -> Iterator[EmailMessage]:
    """`iter_attachments`, descending into a multipart that stands where an attachment would
    (a forwarded bundle, a nested multipart/mixed): its attachments are the message's too."""
    for part in message.iter_attachments():
        if part.is_multipart() and part.get_content_maintype() == "multipart":
            yield from _attachments(part)
        else:
            yield part


def _attached_message(part: EmailMessage, depth: int) -> list[EmailPart]:
    """A forwarded message: its body as `<its subject>.md` and its own attachments."""
    payload = part.get_payload()
    inner = payload[0] if isinstance(payload, list) and payload else None
    if not isinstance(inner, EmailMessage):
        return [_part(part, 1)]
    body, attachments = _contents(inner, depth + 1)
    forwarded = _described(inner, body)
    if not body.strip():
        return attachments
    text = body_markdown(forwarded).encode()
    name = (forwarded.subject or "forwarded message") + ".md"
    return [EmailPart(file_name=name, content_type="text/markdown", data=text), *attachments]


def _text_of(part: MIMEPart) -> str:
    data = _payload(part)
    text = decode_bytes(data, part.get_content_charset())
    if part.get_content_subtype() == "html":
        return html_to_text(text)
    return text.replace("\r\n", "\n").replace("\x00", "")


def _payload(part: Message) -> bytes:
    data = part.get_payload(decode=True)
    if isinstance(data, bytes):
        return data
    payload = part.get_payload()
    return payload.encode("utf-8", "surrogateescape") if isinstance(payload, str) else b""


def _part(part: EmailMessage, number: int) -> EmailPart:
    content_type = part.get_content_type()
    charset = _codec(part.get_content_charset()) if part.get_content_maintype() == "text" else None
    if charset is not None and _TOKEN.match(charset):
        content_type += f"; charset={charset}"
    try:
        name = part.get_filename()
    except Exception:  # a malformed RFC 2231 parameter: the part stays, unnamed
        name = None
    if not name:
        extension = mimetypes.guess_extension(part.get_content_type()) or ""
        name = f"attachment-{number}{extension}"
    return EmailPart(file_name=header_text(name), content_type=content_type, data=_payload(part))
