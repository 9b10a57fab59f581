"""Inbound e-mail: a knowledge base with `source: "email"` gets an address, and a signed raw
message sent to `POST /webhooks/inbound-email` becomes files of it, processed like uploads."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
import re
import time
from collections.abc import AsyncIterator, Callable
from email.message import EmailMessage

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from entrypoints.http.app import create_app
from tests.http.conftest import forget_members
from tests.http.helpers import make_kb, running_worker
from tests.http.processing_support import EmbedderOverride, settle

SECRET = "s" * 40
DOMAIN = "in.example.test"
ADDRESS = re.compile(rf"^kb-[0-9a-f]{{20}}@{re.escape(DOMAIN)}$")
METADATA_KEYS = {"emailId", "emailSubject", "emailFrom", "emailDate", "emailMessageId"}


@pytest.fixture
def mail_settings(settings):
    return dataclasses.replace(settings, inbound_email_domain=DOMAIN, inbound_email_secret=SECRET)


@pytest.fixture
async def mail(mail_settings, database, clean, registry) -> AsyncIterator[AsyncTestClient]:
    app = create_app(mail_settings, database, EmbedderOverride(registry))
    async with AsyncTestClient(app=app) as client:
        client.ap_app = app  # type: ignore[attr-defined]
        await forget_members(client)
        yield client


@pytest.fixture
def worker(mail_settings, database, registry) -> Callable:
    return lambda: running_worker(mail_settings, database, EmbedderOverride(registry))


def message(
    to: str,
    *,
    subject: str | None = "Quarterly report",
    body: str = "Numbers are up.\nSee the attachment.",
    attachments: tuple[tuple[str, str, bytes], ...] = (("notes.md", "text/markdown", b"# Q3\n"),),
    message_id: str | None = "<q3-report@mail.example>",
    **headers: str,
) -> bytes:
    mail = EmailMessage()
    mail["From"] = '"Doe, Jane" <jane@example.com>'
    mail["To"] = to
    if subject is not None:
        mail["Subject"] = subject
    mail["Date"] = "Mon, 23 Nov 2026 08:00:00 +0000"
    if message_id is not None:
        mail["Message-ID"] = message_id
    for name, value in headers.items():
        mail[name.replace("_", "-")] = value
    mail.set_content(body)
    for name, content_type, data in attachments:
        maintype, subtype = content_type.split("/")
        mail.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return mail.as_bytes()


def signed(raw: bytes, *, at: int | None = None, secret: str = SECRET) -> dict[str, str]:
    stamp = str(int(time.time()) if at is None else at)
    digest = hmac.new(secret.encode(), f"{stamp}.".encode() + raw, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "message/rfc822",
        "X-Inbound-Timestamp": stamp,
        "X-Inbound-Signature": f"v1={digest}",
    }


async def deliver(client, raw: bytes, *, query: str = "", **kw):
    return await client.post(
        f"/webhooks/inbound-email{query}", content=raw, headers=signed(raw, **kw)
    )


async def mail_kb(client, who, name: str = "Inbox") -> dict:
    return await make_kb(client, who, name=name, source="email")


async def files_of(client, who, kb_id: int) -> list[dict]:
    response = await client.get(f"/kb/files?kbId={kb_id}", headers=who.headers)
    assert response.status_code == 200, response.text
    return response.json()["files"]


async def deliveries(owner_engine) -> int:
    async with owner_engine.connect() as connection:
        return (await connection.execute(text("SELECT count(*) FROM inbound_emails"))).scalar_one()


# Knowledge bases' addresses


async def test_source_email_gives_an_address_and_null_removes_it(mail, alice):
    kb = await mail_kb(mail, alice)
    assert kb["source"] == "email"
    assert ADDRESS.match(kb["inboundEmailAddress"])
    (listed,) = (await mail.get("/kb/manage", headers=alice.headers)).json()["knowledgeBases"]
    assert listed["inboundEmailAddress"] == kb["inboundEmailAddress"]

    same = await mail.patch(
        "/kb/manage", json={"kbId": kb["id"], "source": "email"}, headers=alice.headers
    )
    assert same.json()["knowledgeBase"]["inboundEmailAddress"] == kb["inboundEmailAddress"]
    off = await mail.patch(
        "/kb/manage", json={"kbId": kb["id"], "source": None}, headers=alice.headers
    )
    assert off.status_code == 200, off.text
    assert (
        off.json()["knowledgeBase"]["source"],
        off.json()["knowledgeBase"]["inboundEmailAddress"],
    ) == (None, None)
    gone = await deliver(mail, message(kb["inboundEmailAddress"]))
    assert (gone.status_code, gone.json()) == (404, {"error": "Unknown recipient"})

    again = await mail.patch(
        "/kb/manage", json={"kbId": kb["id"], "source": "email"}, headers=alice.headers
    )
    renewed = again.json()["knowledgeBase"]["inboundEmailAddress"]
    assert ADDRESS.match(renewed) and renewed != kb["inboundEmailAddress"]
    plain = await make_kb(mail, alice, name="Plain")
    assert (plain["source"], plain["inboundEmailAddress"]) == (None, None)


@pytest.mark.parametrize("source", ["web", "EMAIL", 3, {"type": "email"}])
async def test_any_other_source_is_400_with_details(mail, alice, source):
    created = await mail.post(
        "/kb/manage", json={"name": "X", "source": source}, headers=alice.headers
    )
    assert created.status_code == 400
    assert created.json()["details"][0]["field"] == "source"
    kb = await make_kb(mail, alice)
    changed = await mail.patch(
        "/kb/manage", json={"kbId": kb["id"], "source": source}, headers=alice.headers
    )
    assert changed.status_code == 400
    assert changed.json()["details"][0]["field"] == "source"


async def test_without_a_mail_domain_source_email_is_400_naming_the_setting(client, alice):
    response = await client.post(
        "/kb/manage", json={"name": "Inbox", "source": "email"}, headers=alice.headers
    )
    assert response.status_code == 400
    assert "AP_INBOUND_EMAIL_DOMAIN" in response.json()["error"]
    assert (await client.get("/kb/manage", headers=alice.headers)).json()["knowledgeBases"] == []


# The webhook


async def test_without_a_secret_the_route_is_404(client):
    raw = message("kb-0@in.example.test")
    response = await client.post("/webhooks/inbound-email", content=raw, headers=signed(raw))
    assert response.status_code == 404


async def test_a_message_becomes_files_processed_to_completed_with_its_metadata(
    mail, alice, worker
):
    kb = await mail_kb(mail, alice)
    raw = message(kb["inboundEmailAddress"].upper())
    response = await deliver(mail, raw)
    assert response.status_code == 202, response.text
    receipt = response.json()
    assert receipt["success"] is True and "details" not in receipt
    names = sorted(f["fileName"] for f in receipt["files"])
    assert names == ["Quarterly report.md", "notes.md"]
    for file in receipt["files"]:
        assert file["processingStatus"] == "parsing"
        assert file["knowledgeBaseId"] == kb["id"]
        assert (
            file["fileKey"]
            == f"orgs/org_a/files/{file['fileId']}/{file['fileName'].replace(' ', '_')}"
        )
        assert file["contentKey"] == f"orgs/org_a/files/{file['fileId']}/content.md"
        assert file["userMetadata"] == {
            "emailId": receipt["emailId"],
            "emailSubject": "Quarterly report",
            "emailFrom": '"Doe, Jane" <jane@example.com>',
            "emailDate": "2026-11-23T08:00:00+00:00",
            "emailMessageId": "<q3-report@mail.example>",
        }
    async with worker():
        files = await settle(mail, alice, kb["id"], count=2)
    assert {f["processingStatus"] for f in files} == {"completed"}
    assert all(set(f["userMetadata"]) == METADATA_KEYS for f in files)
    found = await mail.post(
        "/kb/search", json={"kbId": kb["id"], "query": "Numbers are up"}, headers=alice.headers
    )
    assert "Quarterly report.md" in [r["fileName"] for r in found.json()["results"]]


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Inbound-Signature": "v1=" + "0" * 64},
        {"X-Inbound-Signature": "sha256=abc"},
        {"X-Inbound-Signature": ""},
        {"X-Inbound-Timestamp": "yesterday"},
        {"X-Inbound-Timestamp": ""},
    ],
)
async def test_a_bad_signature_is_400_and_creates_nothing(mail, alice, owner_engine, headers):
    kb = await mail_kb(mail, alice)
    raw = message(kb["inboundEmailAddress"])
    response = await mail.post(
        "/webhooks/inbound-email", content=raw, headers={**signed(raw), **headers}
    )
    assert (response.status_code, response.json()) == (400, {"error": "Invalid signature"})
    assert await files_of(mail, alice, kb["id"]) == []
    assert await deliveries(owner_engine) == 0


async def test_an_old_or_future_timestamp_or_another_secret_is_refused(mail, alice):
    kb = await mail_kb(mail, alice)
    raw = message(kb["inboundEmailAddress"])
    # An hour away, not just past the tolerance: the request's own latency moves the edge
    # (tests/unit/test_inbound_email_signature.py holds it on a fixed clock).
    for kw in (
        {"at": int(time.time()) - 3600},
        {"at": int(time.time()) + 3600},
        {"secret": "x" * 40},
    ):
        response = await deliver(mail, raw, **kw)
        assert (response.status_code, response.json()) == (400, {"error": "Invalid signature"})
    altered = await mail.post(
        "/webhooks/inbound-email", content=raw + b"\r\nmore", headers=signed(raw)
    )
    assert altered.status_code == 400


async def test_any_of_several_signatures_may_match(mail, alice):
    kb = await mail_kb(mail, alice)
    raw = message(kb["inboundEmailAddress"])
    headers = signed(raw)
    headers["X-Inbound-Signature"] = f"v1={'a' * 64}, {headers['X-Inbound-Signature']}"
    response = await mail.post("/webhooks/inbound-email", content=raw, headers=headers)
    assert response.status_code == 202, response.text


async def test_an_unknown_recipient_is_404(mail, alice):
    await mail_kb(mail, alice)
    response = await deliver(mail, message(f"kb-{'0' * 20}@{DOMAIN}"))
    assert (response.status_code, response.json()) == (404, {"error": "Unknown recipient"})
    nobody = await deliver(mail, message("someone@else.test"), query="?recipient=kb-x%40nowhere")
    assert nobody.status_code == 404
    for odd in ("kb%00x%40in.example.test", "%ED%B3%A9%40x", "", "<>"):
        refused = await deliver(mail, message("x@y.test"), query=f"?recipient={odd}")
        assert (refused.status_code, refused.json()) == (404, {"error": "Unknown recipient"}), odd


async def test_the_recipient_comes_from_the_query_or_delivered_to_or_cc(mail, alice):
    kb = await mail_kb(mail, alice)
    address = kb["inboundEmailAddress"]
    by_query = await deliver(
        mail, message("list@example.com", message_id="<a@x>"), query=f"?recipient={address}"
    )
    by_delivered_to = await deliver(
        mail, message("list@example.com", message_id="<b@x>", Delivered_To=address.upper())
    )
    by_cc = await deliver(
        mail,
        message(
            '"Team, All" <team@example.com>', message_id="<c@x>", Cc=f'"Inbox, KB" <{address}>'
        ),
    )
    assert [r.status_code for r in (by_query, by_delivered_to, by_cc)] == [202, 202, 202]
    assert len(await files_of(mail, alice, kb["id"])) == 6


async def test_a_message_that_does_not_parse_is_400(mail, alice, owner_engine):
    await mail_kb(mail, alice)
    for raw in (b"just some text, no headers", b"\x00\x01\x02\x03", b"\r\n\r\nbody only"):
        response = await deliver(mail, raw)
        assert response.status_code == 400, raw
        assert "could not be parsed" in response.json()["error"]
    assert await deliveries(owner_engine) == 0


async def test_no_attachment_and_an_empty_body_is_400_and_creates_nothing(
    mail, alice, owner_engine
):
    kb = await mail_kb(mail, alice)
    raw = message(kb["inboundEmailAddress"], body=" \n\n ", attachments=())
    response = await deliver(mail, raw)
    assert response.status_code == 400
    assert response.json()["error"] == "The message has no attachment and an empty body"
    assert await files_of(mail, alice, kb["id"]) == []
    assert await deliveries(owner_engine) == 0


async def test_an_oversize_attachment_is_skipped_and_named(mail, alice, mail_settings):
    kb = await mail_kb(mail, alice)
    big = b"x" * (mail_settings.max_upload_size + 1)
    raw = message(
        kb["inboundEmailAddress"],
        attachments=(("big.txt", "text/plain", big), ("small.txt", "text/plain", b"small")),
    )
    response = await deliver(mail, raw)
    assert response.status_code == 202, response.text
    assert sorted(f["fileName"] for f in response.json()["files"]) == [
        "Quarterly report.md",
        "small.txt",
    ]
    (detail,) = response.json()["details"]
    assert detail["field"] == "attachments" and "big.txt" in detail["message"]
    assert "upload limit" in detail["message"]


async def test_a_message_whose_every_part_is_skipped_is_400_and_creates_nothing(
    mail, alice, mail_settings, owner_engine
):
    kb = await mail_kb(mail, alice)
    big = b"x" * (mail_settings.max_upload_size + 1)
    raw = message(
        kb["inboundEmailAddress"], body="", attachments=(("big.bin", "application/pdf", big),)
    )
    response = await deliver(mail, raw)
    assert response.status_code == 400
    assert response.json()["error"] == "Every part of the message was skipped"
    assert "big.bin" in response.json()["details"][0]["message"]
    assert await files_of(mail, alice, kb["id"]) == []
    assert await deliveries(owner_engine) == 0


async def test_a_body_past_the_bound_is_413_before_parsing(mail, alice, mail_settings):
    kb = await mail_kb(mail, alice)
    huge = b"y" * (mail_settings.max_upload_size * 2 + 1024 * 1024 + 1)
    raw = message(kb["inboundEmailAddress"], attachments=(("huge.bin", "application/pdf", huge),))
    response = await deliver(mail, raw)
    assert response.status_code == 413


async def test_the_body_must_be_sent_as_message_rfc822(mail, alice):
    kb = await mail_kb(mail, alice)
    raw = message(kb["inboundEmailAddress"])
    headers = {**signed(raw), "Content-Type": "application/json"}
    response = await mail.post("/webhooks/inbound-email", content=raw, headers=headers)
    assert response.status_code == 415


async def test_the_same_message_id_again_answers_the_first_files(mail, alice, owner_engine):
    kb = await mail_kb(mail, alice)
    raw = message(kb["inboundEmailAddress"])
    first = await deliver(mail, raw)
    assert first.status_code == 202
    resent = message(kb["inboundEmailAddress"], subject="Different subject, same id")
    again = await deliver(mail, resent)
    assert again.status_code == 200
    assert again.json()["emailId"] == first.json()["emailId"]
    assert {f["fileId"] for f in again.json()["files"]} == {
        f["fileId"] for f in first.json()["files"]
    }
    assert len(await files_of(mail, alice, kb["id"])) == 2
    assert await deliveries(owner_engine) == 1


async def test_a_message_without_message_id_is_recognised_by_its_bytes(mail, alice):
    kb = await mail_kb(mail, alice)
    raw = message(kb["inboundEmailAddress"], message_id=None)
    assert (await deliver(mail, raw)).status_code == 202
    assert (await deliver(mail, raw)).status_code == 200
    assert len(await files_of(mail, alice, kb["id"])) == 2


async def test_concurrent_duplicates_create_one_set_of_files(mail, alice, owner_engine):
    kb = await mail_kb(mail, alice)
    raw = message(kb["inboundEmailAddress"])
    responses = await asyncio.gather(*(deliver(mail, raw) for _ in range(4)))
    assert sorted(r.status_code for r in responses) == [200, 200, 200, 202]
    assert len({r.json()["emailId"] for r in responses}) == 1
    assert len(await files_of(mail, alice, kb["id"])) == 2
    assert await deliveries(owner_engine) == 1


async def test_organizations_stay_apart(mail, alice, bob):
    mine = await mail_kb(mail, alice)
    theirs = await mail_kb(mail, bob)
    raw = message(mine["inboundEmailAddress"])
    assert (await deliver(mail, raw)).status_code == 202
    same_id = message(theirs["inboundEmailAddress"])
    delivered = await deliver(mail, same_id)
    assert delivered.status_code == 202, "the same Message-ID is new to another knowledge base"
    assert all(f["fileKey"].startswith("orgs/org_b/") for f in delivered.json()["files"])
    assert len(await files_of(mail, alice, mine["id"])) == 2
    assert len(await files_of(mail, bob, theirs["id"])) == 2
    foreign = await mail.get(f"/kb/files?kbId={mine['id']}", headers=bob.headers)
    assert foreign.status_code == 404
    (listed,) = (await mail.get("/kb/manage", headers=bob.headers)).json()["knowledgeBases"]
    assert listed["inboundEmailAddress"] == theirs["inboundEmailAddress"]


async def test_the_lookup_function_reveals_nothing_but_the_two_ids(mail, alice, app_pool):
    from adapters.postgres.database import org_connection

    kb = await mail_kb(mail, alice)
    async with org_connection(app_pool, None) as db:
        assert await db.fetch("SELECT count(*) FROM knowledge_bases") == [(0,)]
        rows = await db.fetch(
            "SELECT * FROM ap_inbound_email_recipient($1::text[])",
            ["nobody@x.test", kb["inboundEmailAddress"].upper()],
        )
    assert [tuple(r) for r in rows] == [("org_a", kb["id"])]
    assert list(rows[0].keys()) == ["org_id", "knowledge_base_id"]


async def test_the_document_describes_the_webhook(mail):
    document = (await mail.get("/schema/openapi.json")).json()
    operation = document["paths"]["/webhooks/inbound-email"]["post"]
    assert operation["security"] == []
    assert list(operation["requestBody"]["content"]) == ["message/rfc822"]
    headers = {p["name"]: p["required"] for p in operation["parameters"] if p["in"] == "header"}
    assert headers == {"X-Inbound-Timestamp": True, "X-Inbound-Signature": True}
    assert {"200", "202", "400", "404", "413", "415", "500"} <= set(operation["responses"])
    kb = document["components"]["schemas"]["KnowledgeBaseOut"]["properties"]
    assert "inboundEmailAddress" in kb
