"""Inbound e-mail into knowledge bases: a knowledge base's address, the message as the service
reads it, and the rules that turn its parts into files."""

from __future__ import annotations

import hashlib
import re
import secrets
import unicodedata
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from domain.errors import Invalid, field_error
from domain.files import MAX_FILE_NAME
from domain.text import INVISIBLE, character_class

INVALID_SIGNATURE = "Invalid signature"
UNKNOWN_RECIPIENT = "Unknown recipient"
NOT_CONFIGURED = "Inbound e-mail is not configured on this deployment (AP_INBOUND_EMAIL_DOMAIN)"
MALFORMED_MESSAGE = "The message could not be parsed as an RFC 822 e-mail"
NOTHING_TO_INGEST = "The message has no attachment and an empty body"
EVERYTHING_SKIPPED = "Every part of the message was skipped"
SIGNATURE_TOLERANCE_SECONDS = 300
MAX_RECIPIENTS = 50
MAX_MESSAGE_KEY = 500
MAX_HEADER_TEXT = 998
BODY_CONTENT_TYPE = "text/markdown; charset=utf-8"
NO_SUBJECT_NAME = "message"

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_INVISIBLE_OR_UNSTORABLE = re.compile(f"[{character_class(INVISIBLE)}\ud800-\udfff]")
_SPACES = re.compile(r"\s+")
_ADDRESS = re.compile(
    r"^[^@\s<>\x00-\x1f\x7f\ud800-\udfff]{1,64}@[^@\s<>\x00-\x1f\x7f\ud800-\udfff]{1,255}$"
)


@dataclass(frozen=True, slots=True)
class InboundEmailDomain:
    """The mail domain of the deployment's knowledge-base addresses (`AP_INBOUND_EMAIL_DOMAIN`);
    None when inbound e-mail is not configured."""

    name: str | None = None

    def new_address(self) -> str:
        """A fresh address `kb-<20 random hex digits>@<domain>`: 80 random bits, so that nobody
        guesses a knowledge base's address. Without a configured domain, 400 naming it."""
        if not self.name:
            raise Invalid(
                NOT_CONFIGURED, [field_error("source", "inbound e-mail is not configured")]
            )
        return f"kb-{secrets.token_hex(10)}@{self.name.lower()}"


NO_INBOUND_EMAIL = InboundEmailDomain()


def normalize_address(value: str) -> str | None:
    """An address as addresses are stored (lower case, no surrounding `<>` or spaces), or None
    when `value` is not one."""
    address = value.strip().strip("<>").strip().lower()
    return address if _ADDRESS.match(address) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class EmailPart:
    """An attachment: its name as the sender gave it (possibly none), its type and bytes."""

    file_name: str | None
    content_type: str
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedEmail:
    """A received message as the service reads it: header texts already decoded (encoded words,
    odd charsets), the addresses it was delivered to in the order they are tried, its body as
    text and its attachments."""

    message_id: str | None
    subject: str
    sender: str
    date: str | None
    recipients: list[str]
    body: str
    attachments: list[EmailPart] = field(default_factory=list)
    digest: str = ""
    """sha256 of the raw message: the message's key when it has no Message-ID."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InboundRecipient:
    """The knowledge base an address belongs to, and its organization."""

    org_id: str
    kb_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class InboundDelivery:
    """A message already received by a knowledge base and the file ids it became."""

    email_id: str
    file_ids: list[str]


def message_key(email: ParsedEmail) -> str:
    """What makes two deliveries the same message: its Message-ID (a very long one by its
    digest), else the digest of the whole message."""
    if email.message_id:
        if len(email.message_id) <= MAX_MESSAGE_KEY:
            return email.message_id
        return "sha256:" + hashlib.sha256(email.message_id.encode()).hexdigest()
    return "sha256:" + email.digest


def recipient_candidates(explicit: str | None, email: ParsedEmail) -> list[str]:
    """The addresses tried, in order: `?recipient=` when given (and only it), else the message's
    own (Delivered-To, X-Original-To, To, Cc); each normalized, repeats and non-addresses
    dropped, at most 50."""
    sources = [explicit] if explicit is not None else email.recipients
    seen: dict[str, None] = {}
    for raw in sources:
        address = normalize_address(raw)
        if address is not None:
            seen.setdefault(address, None)
    return list(seen)[:MAX_RECIPIENTS]


def clean_header(value: str | None) -> str:
    """A header's text on one line: control characters and runs of spaces become one space,
    at most 998 characters (a header line's limit)."""
    if not value:
        return ""
    text = _INVISIBLE_OR_UNSTORABLE.sub("", _CONTROL.sub(" ", value))
    return _SPACES.sub(" ", text).strip()[:MAX_HEADER_TEXT]


def file_name_for(name: str | None, fallback: str, extension: str = "") -> str:
    """A file name the upload path accepts (1 to 255 printable characters, no path separator,
    no control or invisible character) from what the sender wrote: only its last path
    component, trimmed so that its extension survives; `fallback` when nothing is left."""
    text = clean_header(name).replace("\\", "/")
    text = PurePosixPath(text).name if "/" in text else text
    text = unicodedata.normalize("NFC", text).strip(" .")
    if not text:
        text = fallback
    if extension and not text.lower().endswith(extension):
        text += extension
    if len(text) > MAX_FILE_NAME:
        suffix = PurePosixPath(text).suffix[:16]
        text = text[: MAX_FILE_NAME - len(suffix)].rstrip(" .") + suffix
    return text


def body_file_name(subject: str) -> str:
    """The body's file: `<subject>.md`, `message.md` for a message without a subject."""
    return file_name_for(subject, NO_SUBJECT_NAME, ".md")


def body_markdown(email: ParsedEmail) -> str:
    """The body file's text: the subject as a heading, who sent it and when, then the body."""
    lines = [f"# {email.subject or '(no subject)'}", ""]
    lines.append(f"From: {email.sender}" if email.sender else "From: (unknown)")
    if email.date:
        lines.append(f"Date: {email.date}")
    return "\n".join(lines) + "\n\n" + email.body.strip() + "\n"


def email_metadata(email_id: str, email: ParsedEmail) -> dict[str, Any]:
    """The `userMetadata` of every file made from one message (agent-platform-api.md §2.1), linking
    them."""
    return {
        "emailId": email_id,
        "emailSubject": email.subject,
        "emailFrom": email.sender,
        "emailDate": email.date,
        "emailMessageId": email.message_id,
    }
