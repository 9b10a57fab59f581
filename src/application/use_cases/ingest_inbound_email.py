from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from application.ports.clock import Clock
from application.ports.file_repository import FileRepository
from application.ports.inbound_deliveries import InboundDeliveries
from application.ports.issued_uploads import IssuedUploadRepository
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.object_storage import ObjectStorage
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.associate_file import AssociateFile, AssociateFileCommand
from application.use_cases.delete_knowledge_base import remove_folders
from domain.errors import Invalid, NotFound, field_error
from domain.files import KnowledgeBaseFile, file_folder, storage_keys, validate_content_type
from domain.identity import Caller
from domain.inbound_email import (
    BODY_CONTENT_TYPE,
    EVERYTHING_SKIPPED,
    NOTHING_TO_INGEST,
    UNKNOWN_RECIPIENT,
    ParsedEmail,
    body_file_name,
    body_markdown,
    email_metadata,
    file_name_for,
    message_key,
)
from domain.knowledge_bases import EMAIL_SOURCE
from domain.uploads import IssuedUpload, UploadPolicy

MAX_FILES = 100
FALLBACK_TYPE = "application/octet-stream"


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestInboundEmailCommand:
    caller: Caller
    kb_id: int
    email: ParsedEmail


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestedEmail:
    """The files a message became; `duplicate` when it had been received before (then the
    files are the first delivery's); `skipped` names the parts left out."""

    email_id: str
    files: list[KnowledgeBaseFile]
    duplicate: bool = False
    skipped: list[dict[str, object]] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Upload:
    file_name: str
    content_type: str
    data: bytes


class IngestInboundEmail:
    """Turn a message sent to a knowledge base's address into files of that knowledge base.

    Rules:
    1. The knowledge base exists in the caller's organization and is still fed by e-mail,
       else 404 "Unknown recipient".
    2. Each attachment becomes a file, and a body with any text one more, `<subject>.md`
       (`message.md` without a subject) holding the subject, sender, date and body as Markdown.
       An attachment over the upload limit, or empty, is skipped and named in `skipped`; so is
       any part past the 100th. A message without attachments and with an empty body is 400;
       one whose every part was skipped is 400 naming them; either way nothing is created.
    3. Files take the upload path: stored under the keys an upload of that name would get
       (`orgs/<org>/files/<fileId>/<safe name>`, `.../content.md`), then associated by
       `AssociateFile` with all of its rules (each recorded as an upload issued here, with
       no address to replay), so each is created `parsing` with its processing job. Every
       file carries `userMetadata` {emailId, emailSubject, emailFrom, emailDate,
       emailMessageId}.
    4. A message is received once per knowledge base, keyed by its Message-ID (by its digest
       when it has none): a redelivery answers the first delivery's files and adds nothing,
       also when two deliveries race.
    5. All of it commits at once; on failure the objects already stored are removed.
    """

    def __init__(
        self,
        knowledge_bases: KnowledgeBaseRepository,
        files: FileRepository,
        deliveries: InboundDeliveries,
        associate: AssociateFile,
        storage: ObjectStorage,
        uow: UnitOfWork,
        policy: UploadPolicy,
        issued: IssuedUploadRepository,
        clock: Clock,
    ) -> None:
        self._knowledge_bases = knowledge_bases
        self._files = files
        self._deliveries = deliveries
        self._associate = associate
        self._storage = storage
        self._uow = uow
        self._max_size = policy.max_size
        self._issued = issued
        self._clock = clock

    async def execute(self, command: IngestInboundEmailCommand) -> IngestedEmail:
        org_id = command.caller.org_id
        # Locked first: deliveries to one knowledge base take turns, so a redelivery racing the
        # first waits for it here rather than deadlocking against AssociateFile's own lock.
        kb = await self._knowledge_bases.get(org_id, command.kb_id, for_update=True)
        if kb is None or kb.source != EMAIL_SOURCE:
            raise NotFound(UNKNOWN_RECIPIENT)
        uploads, skipped = self._uploads(command.email)
        email_id = str(uuid.uuid4())
        earlier = await self._deliveries.claim(
            org_id, command.kb_id, message_key(command.email), email_id
        )
        if earlier is not None:
            files = [await self._files.get(org_id, command.kb_id, f) for f in earlier.file_ids]
            kept = [f for f in files if f is not None]
            return IngestedEmail(email_id=earlier.email_id, files=kept, duplicate=True)
        metadata = email_metadata(email_id, command.email)
        stored: list[str] = []
        try:
            records = []
            for upload in uploads:
                file_id = str(uuid.uuid4())
                file_key, content_key = storage_keys(org_id, file_id, upload.file_name)
                stored.append(file_folder(org_id, file_id))
                await self._storage.put(file_key, upload.data, content_type=upload.content_type)
                await self._issued.add(
                    IssuedUpload(
                        org_id=org_id, file_id=file_id, file_key=file_key,
                        content_type=upload.content_type, expires_at=self._clock.now(),
                    )
                )  # fmt: skip
                records.append(
                    await self._associate.associate(
                        AssociateFileCommand.parse(
                            caller=command.caller,
                            kb_id=command.kb_id,
                            file_id=file_id,
                            file_name=upload.file_name,
                            file_key=file_key,
                            content_key=content_key,
                            content_type=upload.content_type,
                            file_size=len(upload.data),
                            user_metadata=metadata,
                        )
                    )
                )
            await self._deliveries.record_files(org_id, email_id, [r.file_id for r in records])
            await self._uow.commit()
        except BaseException:
            try:
                await self._uow.rollback()
            finally:
                await remove_folders(self._storage, stored)
            raise
        return IngestedEmail(email_id=email_id, files=records, skipped=skipped)

    def _uploads(self, email: ParsedEmail) -> tuple[list[_Upload], list[dict[str, object]]]:
        """The files to make and the parts skipped; 400 when nothing is left."""
        uploads: list[_Upload] = []
        skipped: list[dict[str, object]] = []
        if email.body.strip():
            data = body_markdown(email).encode()
            if len(data) > self._max_size:
                skipped.append(field_error("body", "skipped (over the upload limit)"))
            else:
                name = body_file_name(email.subject)
                uploads.append(_Upload(file_name=name, content_type=BODY_CONTENT_TYPE, data=data))
        for number, part in enumerate(email.attachments, start=1):
            name = file_name_for(part.file_name, f"attachment-{number}")
            if len(part.data) > self._max_size:
                reason = f"{len(part.data)} bytes, over the upload limit of {self._max_size}"
            elif not part.data:
                reason = "empty"
            elif len(uploads) >= MAX_FILES:
                reason = f"more than {MAX_FILES} files in one message"
            else:
                kind = _content_type(part.content_type)
                uploads.append(_Upload(file_name=name, content_type=kind, data=part.data))
                continue
            skipped.append(field_error("attachments", f"{name}: skipped ({reason})"))
        if not uploads and not skipped:
            raise Invalid(NOTHING_TO_INGEST, [field_error("body", "no attachment, empty body")])
        if not uploads:
            raise Invalid(EVERYTHING_SKIPPED, skipped)
        return uploads, skipped


def _content_type(value: str) -> str:
    try:
        return validate_content_type(value)
    except Invalid:
        return FALLBACK_TYPE
