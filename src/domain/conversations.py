"""Conversations: threads of messages with an agent, their titles and the state of the
assistant's response."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Self

from domain.cursors import CURSOR_INVALID, decode_cursor, encode_cursor, invalid_cursor
from domain.errors import Invalid, field_error
from domain.identity import Caller
from domain.ids import parse_positive_id, parse_uuid
from domain.text import BIDI_CONTROLS, check_storable, not_a_string, parse_line

CONVERSATION_NOT_FOUND = "Conversation not found"
THREAD_ID_INVALID = "threadId must be a valid UUID"
TITLE_WITH_THREAD = "title can only be given when creating a conversation"
UPSTREAM_INVALID = "upstreamConversationId must be a valid UUID"
MESSAGES_INVALID = "messages must be a non-empty array"
MAX_TITLE = 120
FALLBACK_TITLE_LENGTH = 60
GENERATED_TITLE_LENGTH = 80
MAX_TITLE_WORDS = 12
DEFAULT_TITLE = "New conversation"
# A new conversation's title version; each title change (generated or renamed) adds one.
FIRST_TITLE_VERSION = 0
MAX_MESSAGES = 100
MAX_PARTS = 50
MAX_TEXT = 100_000
MAX_LIST = 100
LIST_LIMIT_INVALID = f"limit must be an integer from 1 to {MAX_LIST}"
DEFAULT_LIST = 20
USER_PART_TYPES = ("text", "file")
QUOTES = " \"'`*\u201c\u201d\u2018\u2019"


class StreamStatus(StrEnum):
    """The state of a conversation's latest assistant response."""

    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    AWAITING_APPROVAL = "awaiting_approval"
    """The answer paused until the member decides on the tool calls it asked approval for."""

    @property
    def terminal(self) -> bool:
        """Whether the run producing the answer has ended (a paused answer continues as a new
        run of the same message)."""
        return self is not StreamStatus.IN_PROGRESS


class TitleSource(StrEnum):
    """Where the current title came from. Only a `fallback` title may be replaced by a
    generated one; a rename (`renamed`, even to nothing) always wins."""

    SUPPLIED = "supplied"
    FALLBACK = "fallback"
    GENERATED = "generated"
    RENAMED = "renamed"


@dataclass(frozen=True, slots=True, kw_only=True)
class Conversation:
    """A thread of messages between a member and an agent."""

    thread_id: str
    org_id: str
    user_id: str
    agent_id: int | None
    title: str | None
    title_source: TitleSource
    title_version: int
    upstream_conversation_id: str | None
    stream_status: StreamStatus | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class NewConversation:
    """A conversation about to be created; `thread_id` is chosen by the caller."""

    thread_id: str
    org_id: str
    user_id: str
    agent_id: int
    title: str | None
    title_source: TitleSource
    upstream_conversation_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredMessage:
    """A message of a conversation. `parts` use the chat message part vocabulary: `text`,
    `file`, `source-document`, `tool-invocation`, `tool-result`, `tool-approval-request` and
    `tool-approval-response` (`domain.tool_approvals`), and `data-error` (why an answer
    failed)."""

    id: str
    thread_id: str
    role: str
    parts: list[dict[str, Any]]
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRun:
    """One assistant response being produced (or produced) for a conversation."""

    id: str
    org_id: str
    thread_id: str
    message_id: str
    status: StreamStatus
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationCursor:
    """Where a page of the conversation list ends: newest first by `updated_at`, then id."""

    updated_at: datetime
    thread_id: str

    def encode(self) -> str:
        return encode_cursor([self.updated_at.isoformat(), self.thread_id])

    @staticmethod
    def decode(value: object) -> ConversationCursor | None:
        """None for an absent cursor; `Invalid` for one this service did not hand out."""
        if value is None or value == "":
            return None
        try:
            stamp, thread_id = decode_cursor(value)
            updated_at = datetime.fromisoformat(stamp)
        except (ValueError, TypeError):
            raise invalid_cursor() from None
        if updated_at.tzinfo is None:
            raise invalid_cursor()
        return ConversationCursor(
            updated_at=updated_at, thread_id=parse_uuid(thread_id, CURSOR_INVALID)
        )


def visible_to(conversation: Conversation, caller: Caller) -> bool:
    """A conversation belongs to the member who started it; an organization admin may also read,
    rename and delete it. To anyone else it does not exist (404, like a missing one)."""
    if conversation.org_id != caller.org_id:
        return False
    return conversation.user_id == caller.user_id or caller.is_admin


def parse_thread_id(value: object) -> str:
    """A thread id is a uuid; any other value is 400."""
    return parse_uuid(value, THREAD_ID_INVALID)


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadRequest:
    """A member's request about one conversation: who asks, and which (its thread id, parsed)."""

    caller: Caller
    thread_id: str

    @classmethod
    def parse(cls, *, caller: Caller, thread_id: object) -> Self:
        """The request for a well-formed thread id (400 "threadId must be a valid UUID")."""
        return cls(caller=caller, thread_id=parse_thread_id(thread_id))


def validate_title(value: object, *, field: str = "title") -> str:
    """A title is 1 to 120 characters after trimming, on one line, without control characters
    or bidirectional controls (`domain.text.parse_line`)."""
    if not isinstance(value, str):
        raise Invalid(not_a_string(field), [field_error(field, "expected a string")])
    empty = (f"{field} must not be empty", "empty after trimming")
    return parse_line(value, field=field, limit=MAX_TITLE, blank=empty)


def _clean_line(text: str) -> str:
    kept = "".join(
        " " if unicodedata.category(c) in ("Cc", "Zl", "Zp", "Cs") else c
        for c in text
        if c not in BIDI_CONTROLS
    )
    return re.sub(r"\s+", " ", kept).strip()


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,.;:-") + "…"


def fallback_title(text: str, file_names: list[str]) -> str:
    """The title a conversation gets at once: the first line of the first message, shortened to
    about 60 characters at a word boundary; else the first attachment's name."""
    for line in text.splitlines():
        cleaned = _clean_line(line)
        if cleaned:
            return _shorten(cleaned, FALLBACK_TITLE_LENGTH)
    for name in file_names:
        cleaned = _clean_line(name)
        if cleaned:
            return _shorten(cleaned, FALLBACK_TITLE_LENGTH)
    return DEFAULT_TITLE


def clean_generated_title(answer: str) -> str | None:
    """A model's answer made into a title: its first non-empty line without Markdown, quotes
    or a `Title:` label, at most 80 characters. None when nothing usable is left, and when the
    line is no title: without a letter, ending in a colon (a lead-in), or longer than 12 words
    (an answer to the message rather than a name for it); the fallback title is better then."""
    for line in answer.splitlines():
        cleaned = _clean_line(line)
        cleaned = re.sub(r"^(#+|\*+|-)\s*", "", cleaned)
        cleaned = re.sub(r"^title\s*:\s*", "", cleaned, flags=re.IGNORECASE)
        cleaned = cleaned.strip(QUOTES).strip()
        # A quoted title followed by a full stop (`"Trip plans".`) loses both.
        cleaned = cleaned.rstrip(".").rstrip(QUOTES)
        if not cleaned:
            continue
        if (
            not any(c.isalpha() for c in cleaned)
            or cleaned.endswith(":")
            or len(cleaned.split()) > MAX_TITLE_WORDS
        ):
            return None
        return _shorten(cleaned, GENERATED_TITLE_LENGTH)
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    """The validated message a member sends: its parts, its text and its attachments' names."""

    parts: list[dict[str, Any]]

    @property
    def text(self) -> str:
        return "\n\n".join(str(p["text"]) for p in self.parts if p["type"] == "text")

    @property
    def file_names(self) -> list[str]:
        return [str(p.get("filename") or "") for p in self.parts if p["type"] == "file"]


FILE_URL_SCHEMES = frozenset({"http", "https", "data"})


def _invalid(message: str, where: str) -> Invalid:
    return Invalid(message, [field_error(where, message)])


def _validate_part(part: object, where: str) -> dict[str, Any]:
    if not isinstance(part, Mapping):
        raise _invalid("Each part must be an object", where)
    kind = part.get("type")
    if kind == "text":
        text = part.get("text")
        if not isinstance(text, str) or not text.strip():
            raise _invalid("A text part needs non-empty text", f"{where}.text")
        if len(text) > MAX_TEXT:
            raise _invalid(f"A text part may hold at most {MAX_TEXT} characters", f"{where}.text")
        return {"type": "text", "text": check_storable(text, f"{where}.text")}
    if kind == "file":
        url = part.get("url")
        media_type = part.get("mediaType")
        filename = part.get("filename")
        if not isinstance(url, str) or not url:
            raise _invalid("A file part needs a url", f"{where}.url")
        if url.partition(":")[0].lower() not in FILE_URL_SCHEMES or ":" not in url:
            # Stored and handed back to clients that render it: never javascript: or file:.
            raise _invalid("A file part's url must be an http(s) or data: URL", f"{where}.url")
        if not isinstance(media_type, str) or "/" not in media_type:
            raise _invalid("A file part needs a mediaType", f"{where}.mediaType")
        if filename is not None and not isinstance(filename, str):
            raise _invalid("filename must be a string", f"{where}.filename")
        check_storable(url, f"{where}.url")
        check_storable(media_type, f"{where}.mediaType")
        if filename:
            check_storable(filename, f"{where}.filename")
        stored: dict[str, Any] = {"type": "file", "mediaType": media_type, "url": url}
        if filename:
            stored["filename"] = filename
        return stored
    raise _invalid(
        f"Unsupported part type {kind!r}; a user message may hold: " + ", ".join(USER_PART_TYPES),
        f"{where}.type",
    )


def validate_messages(value: object) -> UserMessage:
    """The request's `messages`: a non-empty list whose last element is the message being sent.
    It must have role `user` and at least one part; text parts need text."""
    if not isinstance(value, list) or not value:
        raise _invalid(MESSAGES_INVALID, "messages")
    if len(value) > MAX_MESSAGES:
        raise _invalid(f"messages may hold at most {MAX_MESSAGES} entries", "messages")
    index = len(value) - 1
    message = value[index]
    where = f"messages[{index}]"
    if not isinstance(message, Mapping):
        raise _invalid("Each message must be an object", where)
    if message.get("role") != "user":
        raise _invalid("The message sent must have role user", f"{where}.role")
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        raise _invalid("A message needs a non-empty parts array", f"{where}.parts")
    if len(parts) > MAX_PARTS:
        raise _invalid(f"A message may hold at most {MAX_PARTS} parts", f"{where}.parts")
    return UserMessage(
        parts=[_validate_part(p, f"{where}.parts[{i}]") for i, p in enumerate(parts)]
    )


def validate_list_limit(value: object) -> int:
    """A page size from 1 to 100, default 20."""
    if value is None or value == "":
        return DEFAULT_LIST
    try:
        limit = parse_positive_id(value, LIST_LIMIT_INVALID)
    except Invalid:
        raise _invalid(LIST_LIMIT_INVALID, "limit") from None
    if limit > MAX_LIST:
        raise _invalid(LIST_LIMIT_INVALID, "limit")
    return limit
