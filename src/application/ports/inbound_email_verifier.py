from __future__ import annotations

from typing import Protocol


class InboundEmailVerifier(Protocol):
    """Checks that an inbound message comes from the configured mail provider, unaltered and
    recent: `signature` holds one or more `v1=<hex HMAC-SHA256 of "timestamp.body">` under the
    shared secret, `timestamp` is Unix seconds at most 5 minutes from now; compared in constant
    time."""

    def verify(self, body: bytes, timestamp: str | None, signature: str | None) -> None:
        """Return when the message is signed; `Invalid(INVALID_SIGNATURE)` for anything else
        (a missing, malformed, old or wrong timestamp or signature)."""
        ...
