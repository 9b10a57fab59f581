"""Svix webhook verification: the signature scheme Clerk's webhooks use."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import pytest

from adapters.identity.svix_webhook import SvixWebhookVerifier
from domain.errors import Invalid

KEY = b"0123456789abcdef0123456789abcdef"
SECRET = "whsec_" + base64.b64encode(KEY).decode()
BODY = b'{"type":"organizationMembership.deleted","data":{}}'


def sign(message_id: str, timestamp: int, body: bytes, key: bytes = KEY) -> str:
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def headers(message_id="msg_1", timestamp=None, body=BODY, signature=None):
    timestamp = int(time.time()) if timestamp is None else timestamp
    return {
        "svix-id": message_id,
        "svix-timestamp": str(timestamp),
        "svix-signature": sign(message_id, timestamp, body) if signature is None else signature,
    }


def test_a_signed_message_gives_its_id():
    now = int(time.time())
    message = SvixWebhookVerifier(SECRET).verify(BODY, headers(timestamp=now))
    assert (message.id, message.sent_at.timestamp()) == ("msg_1", now)


def test_any_of_several_signatures_may_match():
    now = int(time.time())
    several = f"v1,{base64.b64encode(b'x' * 32).decode()} v2,abc {sign('msg_1', now, BODY)}"
    assert SvixWebhookVerifier(SECRET).verify(BODY, headers(timestamp=now, signature=several))


@pytest.mark.parametrize(
    "change",
    [
        {"body": BODY + b" "},
        {"age": 6 * 60},
        {"age": -6 * 60},
        {"key": b"another key"},
        {"signature": "v1"},
        {"signature": "v1,%%%not-base64"},
        {"signature": ""},
        {"timestamp": "nan"},
        {"timestamp": "1e400"},
        {"message_id": ""},
        {"body": b"\xff\xfe"},
    ],
)
def test_anything_else_is_an_invalid_signature(change):
    change = dict(change)  # the parameters are made once, at collection: times are taken now
    body = change.pop("body", BODY)
    if "age" in change:
        change["timestamp"] = int(time.time()) - change.pop("age")
    if "key" in change:
        change["signature"] = sign("msg_1", int(time.time()), BODY, key=change.pop("key"))
    sent = headers(**change)
    with pytest.raises(Invalid, match=r"^Invalid webhook signature$"):
        SvixWebhookVerifier(SECRET).verify(body, sent)
