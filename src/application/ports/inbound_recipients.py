from __future__ import annotations

from typing import Protocol

from domain.inbound_email import InboundRecipient


class InboundRecipients(Protocol):
    """Which knowledge base an e-mail address belongs to, across organizations.

    The one lookup that a request without an organization may make: it answers only the
    organization and knowledge base ids of an address that is a knowledge base's inbound
    address now (`source` email), nothing else of any row. Everything after it acts in that
    organization alone.
    """

    async def find(self, addresses: list[str]) -> InboundRecipient | None:
        """The knowledge base of the first of `addresses` (normalized, lower case) that has
        one, or None."""
        ...
