"""Svix-signed webhooks (Clerk's), verified by the Standard Webhooks reference library, which
is what Svix's own `svix.Webhook.verify` calls once it has renamed the headers."""

from __future__ import annotations

import binascii
from collections.abc import Mapping
from datetime import UTC, datetime

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from application.ports.webhook_verifier import INVALID_WEBHOOK_SIGNATURE, VerifiedMessage
from domain.errors import Invalid

_HEADERS = (("svix-id", "webhook-id"), ("svix-timestamp", "webhook-timestamp"))


class SvixWebhookVerifier:
    """`WebhookVerifier` for a `whsec_…` secret. The library leaves malformed input (a
    signature without its comma, bad base64, a body that is not UTF-8) to raise what it
    raises; every such failure is the same 400 here."""

    def __init__(self, secret: str) -> None:
        self._webhook = Webhook(secret)

    def verify(self, body: bytes, headers: Mapping[str, str]) -> VerifiedMessage:
        named = {key.lower(): value for key, value in headers.items()}
        for svix, standard in (*_HEADERS, ("svix-signature", "webhook-signature")):
            named[standard] = named.get(svix, named.get(standard, ""))
        try:
            self._webhook.verify(body, named, json_parse=False)
        except (WebhookVerificationError, ValueError, binascii.Error, OverflowError):
            # UnicodeDecodeError is a ValueError.
            raise Invalid(INVALID_WEBHOOK_SIGNATURE) from None
        # Checked by the library: a number of seconds at most 5 minutes from now.
        sent_at = datetime.fromtimestamp(float(named["webhook-timestamp"]), UTC)
        return VerifiedMessage(id=named["webhook-id"], sent_at=sent_at)
