from __future__ import annotations

from dataclasses import dataclass, replace

from application.ports.file_repository import FileRepository
from application.ports.issued_uploads import IssuedUploadRepository
from application.ports.job_queue import JobQueue, process_file_job
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.object_storage import ObjectStorage
from application.ports.unit_of_work import UnitOfWork
from domain.errors import Conflict, Invalid, NotFound, field_error
from domain.files import KnowledgeBaseFile, NewFile, check_upload_size, file_folder
from domain.identity import Caller
from domain.knowledge_bases import KB_NOT_FOUND
from domain.uploads import (
    ALREADY_ASSOCIATED,
    DEFAULT_MAX_UPLOAD_SIZE,
    NOT_UPLOADED,
    UPLOAD_FILE_DELETED,
    UPLOAD_NOT_ISSUED,
    UploadState,
    essence,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class AssociateFileCommand:
    caller: Caller
    file: NewFile

    @classmethod
    def parse(cls, *, caller: Caller, **fields: object) -> AssociateFileCommand:
        """The association's fields, parsed in the order the specification fixes
        (`NewFile.parse`), for the caller's organization."""
        return cls(caller=caller, file=NewFile.parse(org_id=caller.org_id, **fields))


class AssociateFile:
    """Associate an uploaded file with a knowledge base and queue its processing.

    Rules, checked in this order (the specification's, section 4.3):
    1.-3. The fields are parsed as `NewFile.parse` says (the required fields, the knowledge
       base's id, each field's form, the keys issued for this fileId and fileName).
    4. A declared fileSize is within the upload limit (400 otherwise).
    5. The knowledge base exists in the caller's organization, else 404 "Knowledge base not
       found" (a foreign one looks missing).
    6. The upload was issued by `CreateUpload` for this fileId and fileKey (400 on fileKey
       otherwise). One whose file was deleted is 409 "The file this upload was issued for has
       been deleted", and what a replay of its address stored is removed; one already
       associated is 409 "This file is already associated with a knowledge base".
    7. With a storage (always, when wired): the original has been uploaded (400 on fileKey
       otherwise); its real size equals the declared fileSize (400 on fileSize; an absent
       fileSize becomes the real size) and is within the upload limit; its content type,
       where storage records one, is the declared contentType (400 on contentType).
    8. A file id is associated at most once in an organization (409).
    The record is created in `parsing`, the upload marked associated and the processing job
    queued in the same transaction, so there is never a record without its job or a job
    without its record.
    `associate` does all of it but the commit, for a use case that adds several files in one
    transaction (inbound e-mail).
    """

    def __init__(
        self,
        knowledge_bases: KnowledgeBaseRepository,
        files: FileRepository,
        uploads: IssuedUploadRepository,
        jobs: JobQueue,
        uow: UnitOfWork,
        storage: ObjectStorage,
        max_upload_size: int = DEFAULT_MAX_UPLOAD_SIZE,
    ) -> None:
        self._knowledge_bases = knowledge_bases
        self._files = files
        self._uploads = uploads
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
        new = command.file
        if new.file_size is not None:
            check_upload_size(new.file_size, self._max_upload_size)
        if (
            await self._knowledge_bases.get(new.org_id, new.knowledge_base_id, for_update=True)
            is None
        ):
            raise NotFound(KB_NOT_FOUND)
        await self._check_issued(new)
        new = await self._check_stored(new)
        record = await self._files.add(new)
        await self._uploads.set_state(new.org_id, [new.file_id], UploadState.ASSOCIATED)
        await self._jobs.enqueue(process_file_job(new.org_id, record.id))
        return record

    async def _check_issued(self, new: NewFile) -> None:
        issued = await self._uploads.get(new.org_id, new.file_id, for_update=True)
        if issued is None or issued.file_key != new.file_key:
            raise Invalid(
                UPLOAD_NOT_ISSUED, [field_error("fileKey", "no upload was issued for this key")]
            )
        if issued.state is UploadState.DELETED:
            # What a replayed address stored after the deletion is named by no record.
            await self._storage.delete_prefix(file_folder(new.org_id, new.file_id))
            raise Conflict(UPLOAD_FILE_DELETED)
        if issued.state is UploadState.ASSOCIATED:
            raise Conflict(ALREADY_ASSOCIATED)

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
