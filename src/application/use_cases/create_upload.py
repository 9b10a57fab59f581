from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from application.ports.clock import Clock
from application.ports.issued_uploads import IssuedUploadRepository
from application.ports.object_storage import ObjectStorage, SignedUpload
from application.ports.unit_of_work import UnitOfWork
from domain.errors import Invalid, field_error
from domain.files import (
    check_upload_size,
    parse_file_size,
    storage_keys,
    validate_content_type,
    validate_file_name,
)
from domain.identity import Caller
from domain.text import required
from domain.uploads import IssuedUpload, UploadPolicy


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateUploadCommand:
    caller: Caller
    file_name: str
    content_type: str
    file_size: int

    @classmethod
    def parse(
        cls, *, caller: Caller, file_name: object, content_type: object, file_size: object = None
    ) -> CreateUploadCommand:
        """fileName, contentType and fileSize are required (400 "<field> is required", in that
        order) and well-formed: a file name (a control character, a bidi override or another
        invisible format character is 400), a MIME type, a whole number of bytes."""
        if not isinstance(file_name, str) or not file_name.strip():
            raise Invalid(required("fileName"), [field_error("fileName", "required")])
        if not isinstance(content_type, str) or not content_type.strip():
            raise Invalid(required("contentType"), [field_error("contentType", "required")])
        name, kind = validate_file_name(file_name), validate_content_type(content_type)
        size = parse_file_size(file_size)
        if size is None:
            raise Invalid(required("fileSize"), [field_error("fileSize", "required")])
        return cls(caller=caller, file_name=name, content_type=kind, file_size=size)


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedUpload:
    """A signed address plus the identifiers the association step needs."""

    file_id: str
    file_key: str
    content_key: str
    upload: SignedUpload
    expires_at: datetime


class CreateUpload:
    """Hand out a signed address for uploading one file into the caller's organization.

    Rules: the fields are parsed as `CreateUploadCommand.parse` says; fileSize is at most the upload
    limit (400 otherwise) and is signed into the address as the exact size, so a body of another
    size is refused at upload time (S3 signs Content-Length). A new file id is generated; the keys
    are derived from it: `orgs/<org>/files/<fileId>/<safe name>` and `.../content.md`
    (`AssociateFile` derives them again and accepts no other); the address expires after the
    policy's time to live and accepts one upload. The upload is recorded as issued (its file id,
    key, content type and expiry) and committed: the upload endpoint and `AssociateFile` accept
    only a recorded upload whose file was neither associated nor deleted since.
    """

    def __init__(
        self,
        storage: ObjectStorage,
        uploads: IssuedUploadRepository,
        uow: UnitOfWork,
        clock: Clock,
        policy: UploadPolicy,
    ) -> None:
        self._storage = storage
        self._uploads = uploads
        self._uow = uow
        self._clock = clock
        self._policy = policy

    async def execute(self, command: CreateUploadCommand) -> PreparedUpload:
        size = check_upload_size(command.file_size, self._policy.max_size)
        file_id = str(uuid.uuid4())
        file_key, content_key = storage_keys(command.caller.org_id, file_id, command.file_name)
        expires_at = self._clock.now() + self._policy.url_ttl
        upload = await self._storage.sign_upload(
            file_key,
            content_type=command.content_type,
            size=size,
            expires_at=expires_at,
        )
        await self._uploads.add(
            IssuedUpload(
                org_id=command.caller.org_id,
                file_id=file_id,
                file_key=file_key,
                content_type=command.content_type,
                expires_at=expires_at,
            )
        )
        await self._uow.commit()
        return PreparedUpload(
            file_id=file_id,
            file_key=file_key,
            content_key=content_key,
            upload=upload,
            expires_at=expires_at,
        )
