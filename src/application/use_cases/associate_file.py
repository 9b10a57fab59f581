from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from application.ports.file_repository import FileRepository
from application.ports.job_queue import JobQueue, process_file_job
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.object_storage import ObjectStorage
from application.ports.unit_of_work import UnitOfWork
from domain.errors import Invalid, NotFound, field_error
from domain.files import (
    FILE_FIELDS_REQUIRED,
    KnowledgeBaseFile,
    NewFile,
    is_safe_key,
    org_files_prefix,
    storage_keys,
    validate_content_type,
    validate_file_name,
    validate_file_size,
)
from domain.identity import Caller
from domain.ids import parse_positive_id, parse_uuid
from domain.knowledge_bases import KB_ID_REQUIRED, KB_NOT_FOUND
from domain.text import check_storable_json
from domain.uploads import DEFAULT_MAX_UPLOAD_SIZE, NOT_UPLOADED, essence


@dataclass(frozen=True, slots=True, kw_only=True)
class AssociateFileCommand:
    caller: Caller
    kb_id: object
    file_id: str | UUID | None
    file_name: str | None
    file_key: str | None
    content_key: str | None
    content_type: str | None
    file_size: object = None
    user_metadata: object = None


class AssociateFile:
    """Associate an uploaded file with a knowledge base and queue its processing.

    Rules, checked in this order (spec 4.3):
    1. fileId, fileName, fileKey, contentKey and contentType are all present and non-empty,
       else 400 "File ID, name, file key, content key, and content type are required".
    2. kbId is a positive integer, else 400 "Valid knowledge base ID is required".
    3. fileId is a uuid; the keys lie below the caller's organization prefix and cannot escape
       it; the name, content type, size and metadata are well-formed (400 each).
    4. The keys are the ones `CreateUpload` issued for this fileId and fileName in this
       organization, derived again here (`orgs/<org>/files/<fileId>/<safe name>` and
       `.../content.md`), never taken on trust: another file's key is 400 naming the field.
    5. The knowledge base exists in the caller's organization, else 404 "Knowledge base not
       found" (a foreign one looks missing).
    6. With a storage (always, when wired): the original has been uploaded (400 on fileKey
       otherwise); its real size equals the declared fileSize (400 on fileSize; an absent
       fileSize becomes the real size) and is within the upload limit; its content type,
       where storage records one, is the declared contentType (400 on contentType).
    7. A file id is associated at most once in an organization (409).
    The record is created in `parsing` and the processing job is queued in the same
    transaction, so there is never a record without its job or a job without its record.
    `associate` does all of it but the commit, for a use case that adds several files in one
    transaction (inbound e-mail).
    """

    def __init__(
        self,
        knowledge_bases: KnowledgeBaseRepository,
        files: FileRepository,
        jobs: JobQueue,
        uow: UnitOfWork,
        storage: ObjectStorage,
        max_upload_size: int = DEFAULT_MAX_UPLOAD_SIZE,
    ) -> None:
        self._knowledge_bases = knowledge_bases
        self._files = files
        self._jobs = jobs
        self._uow = uow
        self._max_upload_size = max_upload_size
        self._storage = storage

    async def execute(self, command: AssociateFileCommand) -> KnowledgeBaseFile:
        record = await self.associate(command)
        await self._uow.commit()
        return record

    async def associate(self, command: AssociateFileCommand) -> KnowledgeBaseFile:
        """Every rule and write of `execute`, left uncommitted in the caller's transaction."""
        raw_id = str(command.file_id) if isinstance(command.file_id, UUID) else command.file_id
        required = (
            raw_id,
            command.file_name,
            command.file_key,
            command.content_key,
            command.content_type,
        )
        if any(not isinstance(value, str) or not value.strip() for value in required):
            raise Invalid(FILE_FIELDS_REQUIRED)
        assert raw_id and command.file_name and command.file_key
        assert command.content_key and command.content_type
        kb_id = parse_positive_id(command.kb_id, KB_ID_REQUIRED)
        org_id = command.caller.org_id
        file_id = parse_uuid(raw_id, "File ID must be a UUID")
        file_name = validate_file_name(command.file_name)
        file_key = _own_key(org_id, command.file_key, "fileKey")
        content_key = _own_key(org_id, command.content_key, "contentKey")
        issued_file_key, issued_content_key = storage_keys(org_id, file_id, file_name)
        _issued(file_key, issued_file_key, "fileKey")
        _issued(content_key, issued_content_key, "contentKey")
        new = NewFile(
            org_id=org_id,
            knowledge_base_id=kb_id,
            file_id=file_id,
            file_name=file_name,
            file_key=file_key,
            content_key=content_key,
            content_type=validate_content_type(command.content_type),
            file_size=validate_file_size(command.file_size, self._max_upload_size),
            user_metadata=_metadata(command.user_metadata),
        )
        if await self._knowledge_bases.get(org_id, kb_id, for_update=True) is None:
            raise NotFound(KB_NOT_FOUND)
        new = await self._check_stored(new)
        record = await self._files.add(new)
        await self._jobs.enqueue(process_file_job(org_id, record.id))
        return record

    async def _check_stored(self, new: NewFile) -> NewFile:
        stored = await self._storage.stat(new.file_key)
        if stored is None:
            raise Invalid(NOT_UPLOADED, [field_error("fileKey", "nothing uploaded to this key")])
        if stored.size > self._max_upload_size or (
            new.file_size is not None and new.file_size != stored.size
        ):
            raise Invalid(
                f"fileSize does not match the uploaded file ({stored.size} bytes)",
                [field_error("fileSize", f"the uploaded file has {stored.size} bytes")],
            )
        if stored.content_type is not None and essence(stored.content_type) != essence(
            new.content_type
        ):
            raise Invalid(
                "contentType does not match the uploaded file",
                [field_error("contentType", f"the file was uploaded as {stored.content_type}")],
            )
        if new.file_size is None:
            return replace(new, file_size=stored.size)
        return new


def _own_key(org_id: str, key: str, field: str) -> str:
    if not key.startswith(org_files_prefix(org_id)) or not is_safe_key(key):
        raise Invalid(
            f"{field} must be a storage key issued to your organization",
            [field_error(field, "outside the organization's storage")],
        )
    return key


def _issued(key: str, issued: str, field: str) -> None:
    if key != issued:
        raise Invalid(
            f"{field} is not the key issued for this fileId and fileName",
            [field_error(field, f"expected {issued}")],
        )


def _metadata(value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise Invalid(
            "userMetadata must be an object", [field_error("userMetadata", "expected an object")]
        )
    check_storable_json(value, "userMetadata")
    return value
