"""The inbound e-mail webhook's signature at its edges, on a fixed clock: the HTTP tests sign
with the real time, so they stay well away from the edges the request's own latency moves."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime

import pytest

from adapters.email.signature import MAX_SIGNATURES, HmacInboundEmailVerifier
from domain.errors import Invalid
from domain.inbound_email import SIGNATURE_TOLERANCE_SECONDS
from tests.fakes.basics import FakeClock

SECRET = "s" * 40
BODY = b"From: jane@example.com\r\n\r\nhello"
NOW = datetime(2026, 11, 24, 10, 0, 0, tzinfo=UTC)
STAMP = int(NOW.timestamp())


def signature(stamp: int, body: bytes = BODY, secret: str = SECRET) -> str:
    digest = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256)
    return "v1=" + digest.hexdigest()


def verifier() -> HmacInboundEmailVerifier:
    return HmacInboundEmailVerifier(SECRET, FakeClock(NOW))


@pytest.mark.parametrize("offset", [-SIGNATURE_TOLERANCE_SECONDS, 0, SIGNATURE_TOLERANCE_SECONDS])
def test_a_timestamp_within_the_tolerance_is_accepted(offset):
    stamp = STAMP + offset
    verifier().verify(BODY, str(stamp), signature(stamp))


@pytest.mark.parametrize(
    "offset", [-SIGNATURE_TOLERANCE_SECONDS - 1, SIGNATURE_TOLERANCE_SECONDS + 1]
)
def test_a_timestamp_one_second_outside_is_refused(offset):
    stamp = STAMP + offset
    with pytest.raises(Invalid, match=r"^Invalid signature$"):
        verifier().verify(BODY, str(stamp), signature(stamp))


def test_a_sender_rotating_its_secret_may_send_both_signatures():
    both = f"{signature(STAMP, secret='o' * 40)}, {signature(STAMP)}"
    verifier().verify(BODY, str(STAMP), both)


def test_upper_case_hex_and_a_padded_timestamp_are_accepted():
    verifier().verify(BODY, f" {STAMP} ", "v1=" + signature(STAMP)[3:].upper())


def test_only_the_first_signatures_are_compared():
    wrong = " ".join([signature(STAMP, secret="o" * 40)] * MAX_SIGNATURES)
    with pytest.raises(Invalid):
        verifier().verify(BODY, str(STAMP), f"{wrong} {signature(STAMP)}")


@pytest.mark.parametrize(
    ("stamp", "sent"),
    [
        (str(STAMP), signature(STAMP, body=BODY + b"!")),
        (str(STAMP + 1), signature(STAMP)),
        (str(STAMP), signature(STAMP).replace("v1=", "v0=")),
        (str(STAMP), None),
        (None, signature(STAMP)),
        ("1" * 13, signature(STAMP)),
        ("-5", signature(STAMP)),
    ],
)
def test_anything_else_is_refused(stamp, sent):
    with pytest.raises(Invalid, match=r"^Invalid signature$"):
        verifier().verify(BODY, stamp, sent)
