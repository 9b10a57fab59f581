from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

INVALID_WEBHOOK_SIGNATURE = "Invalid webhook signature"


class WebhookVerifier(Protocol):
    """Checks that a webhook message comes from the identity provider, unaltered and recent
    (Svix: an HMAC-SHA256 over `id.timestamp.body`, timestamps at most 5 minutes off, any of
    several `v1,` signatures, compared in constant time)."""

    def verify(self, body: bytes, headers: Mapping[str, str]) -> str:
        """The message's id; `Invalid(INVALID_WEBHOOK_SIGNATURE)` for anything else."""
        ...
