"""Bodies of `/chat`: the message sent and the answers of the polling, resuming and cancelling
routes. msgspec Structs, camelCase on the wire."""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta

from domain.agents import AGENT_ID_REQUIRED
from domain.conversations import (
    MAX_MESSAGES,
    MAX_PARTS,
    MAX_TEXT,
    MAX_TITLE,
    MESSAGES_INVALID,
    THREAD_ID_INVALID,
    UPSTREAM_INVALID,
)
from domain.text import not_a_string
from domain.tool_approvals import (
    APPROVAL_ID_INVALID,
    APPROVED_INVALID,
    REASON_CHARS,
    REASON_INVALID,
)
from entrypoints.http.rules import TYPE, Rule
from entrypoints.http.schemas import (
    NO_NUL,
    NOT_BLANK,
    ONE_LINE,
    Camel,
    PositiveId,
    Uuid,
    documented,
)

# http(s) or data: URLs only, whatever the scheme's case (`domain.conversations`).
FILE_URL = r"^([hH][tT][tT][pP][sS]?|[dD][aA][tT][aA]):[^\u0000]*$"
TEXT_PART = {
    "type": "object",
    "required": ["type", "text"],
    "properties": {
        "type": {"type": "string", "enum": ["text"]},
        "text": {"type": "string", "maxLength": MAX_TEXT, "pattern": NOT_BLANK},
    },
}
FILE_PART = {
    "type": "object",
    "required": ["type", "url", "mediaType"],
    "properties": {
        "type": {"type": "string", "enum": ["file"]},
        "url": {
            "type": "string",
            "pattern": FILE_URL,
        },
        "mediaType": {"type": "string", "pattern": r"^[^\u0000]*/[^\u0000]*$"},
        "filename": {"type": "string", "pattern": NO_NUL},
    },
}
USER_MESSAGE = {
    "type": "object",
    "required": ["role", "parts"],
    "properties": {
        "role": {"type": "string", "enum": ["user"]},
        "parts": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_PARTS,
            "items": {"oneOf": [TEXT_PART, FILE_PART]},
        },
    },
}


class ChatBody(Camel):
    rules = (
        Rule("messages", MESSAGES_INVALID),
        Rule("agentId", AGENT_ID_REQUIRED),
        Rule("threadId", THREAD_ID_INVALID),
        Rule("title", not_a_string("title"), TYPE, "expected a string"),
        Rule("upstreamConversationId", UPSTREAM_INVALID),
    )

    messages: Annotated[
        list[dict[str, Any]],
        Meta(
            min_length=1,
            description="The message sent, last (earlier ones are ignored: the thread holds "
            "them): role `user`, text parts and file parts",
            extra_json_schema={"extra": {"maxItems": MAX_MESSAGES, "items": USER_MESSAGE}},
        ),
    ]
    agent_id: PositiveId
    thread_id: Uuid | None = None
    upstream_conversation_id: Uuid | None = None
    title: (
        Annotated[
            str,
            Meta(
                description=f"Creation only: 1 to {MAX_TITLE} characters after trimming, one line",
                extra_json_schema=documented(ONE_LINE, maxLength=MAX_TITLE),
            ),
        ]
        | None
    ) = None


class ChatAccepted(Camel):
    thread_id: str
    status: str


class CancelResponse(Camel):
    success: bool
    thread_id: str
    cancelled: bool
    stream_status: str | None


class ApprovalBody(Camel):
    rules = (
        Rule("approvalId", APPROVAL_ID_INVALID),
        Rule("approved", APPROVED_INVALID),
        Rule("reason", REASON_INVALID),
    )

    approval_id: Annotated[
        Uuid, Meta(description="The `approvalId` of the `tool-approval-request` answered")
    ]
    approved: bool
    reason: (
        Annotated[
            str,
            Meta(
                max_length=REASON_CHARS,
                description="Why, shown to the model with a denial",
            ),
        ]
        | None
    ) = None


class ApprovalResponse(Camel):
    success: bool
    thread_id: str
    continued: Annotated[
        bool,
        Meta(
            description="Whether the answer now continues (follow `GET /chat/{threadId}/"
            "stream`); false while other approvals of the answer wait for a decision"
        ),
    ]
