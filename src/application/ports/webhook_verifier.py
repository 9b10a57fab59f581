from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

INVALID_WEBHOOK_SIGNATURE = "Invalid webhook signature"


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifiedMessage:
    """A message the provider signed: its id and when it was sent (its signed timestamp)."""

    id: str
    sent_at: datetime


class WebhookVerifier(Protocol):
    """Checks that a webhook message comes from the identity provider, unaltered and recent
    (Svix: an HMAC-SHA256 over `id.timestamp.body`, timestamps at most 5 minutes off, any of
    several `v1,` signatures, compared in constant time)."""

    def verify(self, body: bytes, headers: Mapping[str, str]) -> VerifiedMessage:
        """The message's id and time; `Invalid(INVALID_WEBHOOK_SIGNATURE)` for anything
        else."""
        ...
