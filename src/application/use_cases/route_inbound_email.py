from __future__ import annotations

from dataclasses import dataclass

from application.ports.email_parser import EmailParser
from application.ports.inbound_recipients import InboundRecipients
from domain.errors import NotFound
from domain.inbound_email import (
    UNKNOWN_RECIPIENT,
    InboundRecipient,
    ParsedEmail,
    recipient_candidates,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteInboundEmailCommand:
    raw: bytes
    recipient: str | None = None
    """`?recipient=`: the address the mail provider delivered to, when it says."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutedEmail:
    recipient: InboundRecipient
    email: ParsedEmail


class RouteInboundEmail:
    """Read a signed inbound message and find the knowledge base it was sent to.

    Rules: a message that does not parse is 400 (`EmailParser`). The recipient is the given
    `recipient` alone when there is one, else the message's Delivered-To, X-Original-To, To
    and Cc addresses in that order, compared case-insensitively; the first that is a knowledge
    base's inbound address wins (at most 50 are tried). None: 404 "Unknown recipient". The
    lookup is the one step that crosses organizations (`InboundRecipients`) and learns only
    the organization and knowledge base ids.
    """

    def __init__(self, parser: EmailParser, recipients: InboundRecipients) -> None:
        self._parser = parser
        self._recipients = recipients

    async def execute(self, command: RouteInboundEmailCommand) -> RoutedEmail:
        email = await self._parser.parse(command.raw)
        candidates = recipient_candidates(command.recipient, email)
        found = await self._recipients.find(candidates) if candidates else None
        if found is None:
            raise NotFound(UNKNOWN_RECIPIENT)
        return RoutedEmail(recipient=found, email=email)
