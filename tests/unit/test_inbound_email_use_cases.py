"""The inbound e-mail use cases with fakes: addresses on knowledge bases, routing a message to
its knowledge base, and ingesting it through the upload path."""

from __future__ import annotations

import pytest

from application.use_cases.associate_file import AssociateFile
from application.use_cases.create_knowledge_base import (
    CreateKnowledgeBase,
    CreateKnowledgeBaseCommand,
)
from application.use_cases.ingest_inbound_email import IngestInboundEmail, IngestInboundEmailCommand
from application.use_cases.route_inbound_email import RouteInboundEmail, RouteInboundEmailCommand
from application.use_cases.update_knowledge_base import (
    UpdateKnowledgeBase,
    UpdateKnowledgeBaseCommand,
)
from domain.errors import Invalid, NotFound
from domain.inbound_email import EmailPart, InboundEmailDomain, InboundRecipient, ParsedEmail
from domain.uploads import UploadPolicy
from tests.fakes.basics import FakeClock, FakeStorage, FakeUnitOfWork
from tests.fakes.embeddings import FakeChunks
from tests.fakes.inbound_email import FakeInboundDeliveries, FakeInboundRecipients

DOMAIN = InboundEmailDomain("In.Example.Test")
MAX = 100


def email(**overrides) -> ParsedEmail:
    fields = {
        "message_id": "<m@x>",
        "subject": "Hello",
        "sender": "a@x.test",
        "date": "2026-11-23T08:00:00+00:00",
        "recipients": ["kb-1@in.example.test"],
        "body": "Some text",
        "attachments": [EmailPart(file_name="a.txt", content_type="text/plain", data=b"abc")],
        "digest": "d",
    }
    fields.update(overrides)
    return ParsedEmail(**fields)


@pytest.fixture
def deliveries() -> FakeInboundDeliveries:
    return FakeInboundDeliveries()


@pytest.fixture
def ingest(world, deliveries) -> IngestInboundEmail:
    world.uow = FakeUnitOfWork(world.files, world.kbs, world.jobs, deliveries, world.uploads)
    return ingesting(world, deliveries, world.storage)


def ingesting(world, deliveries, storage) -> IngestInboundEmail:
    associate = AssociateFile(
        world.kbs, world.files, world.uploads, world.jobs, world.uow, storage, MAX
    )
    return IngestInboundEmail(
        world.kbs,
        world.files,
        deliveries,
        associate,
        storage,
        world.uow,
        UploadPolicy(max_size=MAX),
        world.uploads,
        FakeClock(),
    )


async def mail_kb(world, caller) -> int:
    summary = await CreateKnowledgeBase(world.kbs, world.uow, inbound=DOMAIN).execute(
        CreateKnowledgeBaseCommand.parse(caller=caller, name="Inbox", source="email")
    )
    return summary.knowledge_base.id


async def test_source_email_gives_a_lower_case_random_address(world, caller):
    kb_id = await mail_kb(world, caller)
    kb = world.kbs.rows[kb_id]
    assert kb.source == "email"
    assert kb.inbound_email_address is not None
    assert kb.inbound_email_address.endswith("@in.example.test")
    other = world.kbs.rows[await mail_kb(world, caller)]
    assert other.inbound_email_address != kb.inbound_email_address


async def test_without_a_domain_source_email_is_refused(world, caller):
    with pytest.raises(Invalid, match="AP_INBOUND_EMAIL_DOMAIN"):
        await CreateKnowledgeBase(world.kbs, world.uow).execute(
            CreateKnowledgeBaseCommand.parse(caller=caller, name="Inbox", source="email")
        )
    assert world.kbs.rows == {}


async def test_changing_the_source_keeps_removes_and_renews_the_address(world, caller):
    kb_id = await mail_kb(world, caller)
    first = world.kbs.rows[kb_id].inbound_email_address
    update = UpdateKnowledgeBase(world.kbs, FakeChunks(), world.jobs, world.uow, DOMAIN)
    kept = await update.execute(
        UpdateKnowledgeBaseCommand.parse(caller=caller, kb_id=kb_id, source="email")
    )
    assert kept.knowledge_base.inbound_email_address == first
    off = await update.execute(
        UpdateKnowledgeBaseCommand.parse(caller=caller, kb_id=kb_id, source=None)
    )
    assert (off.knowledge_base.source, off.knowledge_base.inbound_email_address) == (None, None)
    on = await update.execute(
        UpdateKnowledgeBaseCommand.parse(caller=caller, kb_id=kb_id, source="email")
    )
    assert on.knowledge_base.inbound_email_address not in (None, first)
    with pytest.raises(Invalid) as refused:
        await update.execute(
            UpdateKnowledgeBaseCommand.parse(caller=caller, kb_id=kb_id, source="web")
        )
    assert refused.value.details == [{"field": "source", "message": 'expected "email" or null'}]


class Parser:
    def __init__(self, parsed: ParsedEmail) -> None:
        self.parsed = parsed

    async def parse(self, raw: bytes) -> ParsedEmail:
        return self.parsed


async def test_routing_tries_the_explicit_recipient_alone_then_the_headers_in_order():
    target = InboundRecipient(org_id="org_a", kb_id=7)
    recipients = FakeInboundRecipients({"kb-2@in.test": target})
    parsed = email(recipients=["nobody@x", "KB-2@In.Test", "kb-2@in.test", "not an address"])
    route = RouteInboundEmail(Parser(parsed), recipients)
    routed = await route.execute(RouteInboundEmailCommand(raw=b"x"))
    assert routed.recipient == target
    assert recipients.asked[-1] == ["nobody@x", "kb-2@in.test"]
    with pytest.raises(NotFound, match="Unknown recipient"):
        await route.execute(RouteInboundEmailCommand(raw=b"x", recipient="nobody@x"))
    with pytest.raises(NotFound, match="Unknown recipient"):
        await RouteInboundEmail(Parser(email(recipients=[])), recipients).execute(
            RouteInboundEmailCommand(raw=b"x")
        )


async def test_each_attachment_and_the_body_become_files_by_the_upload_path(
    world, caller, ingest, deliveries
):
    kb_id = await mail_kb(world, caller)
    result = await ingest.execute(
        IngestInboundEmailCommand(caller=caller, kb_id=kb_id, email=email())
    )
    assert [f.file_name for f in result.files] == ["Hello.md", "a.txt"]
    for file in result.files:
        assert file.file_key == f"orgs/org_a/files/{file.file_id}/{file.file_name}"
        assert world.storage.objects[file.file_key]
        assert file.user_metadata == {
            "emailId": result.email_id,
            "emailSubject": "Hello",
            "emailFrom": "a@x.test",
            "emailDate": "2026-11-23T08:00:00+00:00",
            "emailMessageId": "<m@x>",
        }
    assert len(world.jobs.jobs) == 2
    assert world.uow.commits == 2, "the knowledge base's creation, then the message at once"
    body = world.storage.objects[result.files[0].file_key].decode()
    assert body.startswith("# Hello\n\nFrom: a@x.test\n") and body.endswith("Some text\n")
    (delivery,) = deliveries.rows.values()
    assert delivery.file_ids == [f.file_id for f in result.files]


async def test_a_redelivery_answers_the_first_files(world, caller, ingest):
    kb_id = await mail_kb(world, caller)
    first = await ingest.execute(
        IngestInboundEmailCommand(caller=caller, kb_id=kb_id, email=email())
    )
    again = await ingest.execute(
        IngestInboundEmailCommand(caller=caller, kb_id=kb_id, email=email(subject="Other"))
    )
    assert again.duplicate and again.email_id == first.email_id
    assert [f.id for f in again.files] == [f.id for f in first.files]
    assert len(world.files.rows) == 2


async def test_skipped_parts_are_named_and_all_skipped_is_refused(world, caller, ingest):
    kb_id = await mail_kb(world, caller)
    big = EmailPart(file_name="big.pdf", content_type="application/pdf", data=b"x" * (MAX + 1))
    empty = EmailPart(file_name=None, content_type="text/plain", data=b"")
    result = await ingest.execute(
        IngestInboundEmailCommand(
            caller=caller,
            kb_id=kb_id,
            email=email(attachments=[big, empty, email().attachments[0]]),
        )
    )
    assert [f.file_name for f in result.files] == ["Hello.md", "a.txt"]
    assert [d["message"] for d in result.skipped] == [
        f"big.pdf: skipped ({MAX + 1} bytes, over the upload limit of {MAX})",
        "attachment-2: skipped (empty)",
    ]
    with pytest.raises(Invalid, match="Every part of the message was skipped"):
        await ingest.execute(
            IngestInboundEmailCommand(
                caller=caller,
                kb_id=kb_id,
                email=email(message_id="<n@x>", body="", attachments=[big]),
            )
        )
    with pytest.raises(Invalid, match="no attachment and an empty body"):
        await ingest.execute(
            IngestInboundEmailCommand(
                caller=caller,
                kb_id=kb_id,
                email=email(message_id="<o@x>", body="\n", attachments=[]),
            )
        )
    assert len(world.files.rows) == 2


class FailingSecondPut(FakeStorage):
    async def put(self, key: str, data: bytes, *, content_type: str) -> None:
        if self.objects:
            raise OSError("storage unavailable")
        await super().put(key, data, content_type=content_type)


async def test_a_failure_midway_stores_and_creates_nothing(world, caller, deliveries):
    kb_id = await mail_kb(world, caller)
    storage = FailingSecondPut()
    world.uow = FakeUnitOfWork(world.files, world.kbs, world.jobs, deliveries, world.uploads)
    ingest = ingesting(world, deliveries, storage)
    with pytest.raises(OSError, match="storage unavailable"):
        await ingest.execute(IngestInboundEmailCommand(caller=caller, kb_id=kb_id, email=email()))
    assert storage.objects == {}
    assert (world.files.rows, deliveries.rows, world.jobs.jobs) == ({}, {}, [])


async def test_an_unreadable_content_type_is_stored_as_octet_stream(world, caller, ingest):
    kb_id = await mail_kb(world, caller)
    odd = EmailPart(file_name="x.bin", content_type="not a type", data=b"1")
    result = await ingest.execute(
        IngestInboundEmailCommand(
            caller=caller, kb_id=kb_id, email=email(body="", attachments=[odd])
        )
    )
    assert [(f.file_name, f.content_type) for f in result.files] == [
        ("x.bin", "application/octet-stream")
    ]


async def test_a_knowledge_base_no_longer_fed_by_email_is_an_unknown_recipient(
    world, caller, stranger, ingest
):
    kb_id = await mail_kb(world, caller)
    with pytest.raises(NotFound, match="Unknown recipient"):
        await ingest.execute(IngestInboundEmailCommand(caller=stranger, kb_id=kb_id, email=email()))
    await UpdateKnowledgeBase(world.kbs, FakeChunks(), world.jobs, world.uow, DOMAIN).execute(
        UpdateKnowledgeBaseCommand.parse(caller=caller, kb_id=kb_id, source=None)
    )
    with pytest.raises(NotFound, match="Unknown recipient"):
        await ingest.execute(IngestInboundEmailCommand(caller=caller, kb_id=kb_id, email=email()))
