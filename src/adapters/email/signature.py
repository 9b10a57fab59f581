"""The inbound e-mail webhook's signature: `X-Inbound-Signature: v1=<hex HMAC-SHA256 of
"<X-Inbound-Timestamp>.<body>">` under `AP_INBOUND_EMAIL_SECRET`."""

from __future__ import annotations

import hashlib
import hmac
import re

from application.ports.clock import Clock
from domain.errors import Invalid
from domain.inbound_email import INVALID_SIGNATURE, SIGNATURE_TOLERANCE_SECONDS

_TIMESTAMP = re.compile(r"[0-9]{1,12}")
MAX_SIGNATURES = 8


class HmacInboundEmailVerifier:
    """`InboundEmailVerifier` with a shared secret. Several `v1=` values (separated by commas
    or spaces) may be sent, so that a sender can sign with an old and a new secret while it
    rotates them; each is compared in constant time."""

    def __init__(self, secret: str, clock: Clock) -> None:
        self._key = secret.encode()
        self._clock = clock

    def verify(self, body: bytes, timestamp: str | None, signature: str | None) -> None:
        stamp = (timestamp or "").strip()
        if not _TIMESTAMP.fullmatch(stamp):
            raise Invalid(INVALID_SIGNATURE)
        if abs(self._clock.now().timestamp() - int(stamp)) > SIGNATURE_TOLERANCE_SECONDS:
            raise Invalid(INVALID_SIGNATURE)
        expected = hmac.new(self._key, stamp.encode() + b"." + body, hashlib.sha256)
        wanted = expected.hexdigest().encode()
        sent = [
            value[3:].strip().lower().encode("latin-1", "replace")
            for value in re.split(r"[,\s]+", signature or "")
            if value.startswith("v1=")
        ]
        matched = False
        for candidate in sent[:MAX_SIGNATURES]:
            matched |= hmac.compare_digest(wanted, candidate)
        if not matched:
            raise Invalid(INVALID_SIGNATURE)
