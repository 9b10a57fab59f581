"""What the use cases on one file of a knowledge base share: which file a request names,
finding it in the caller's organization, and closing the upload addresses of deleted files."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from application.ports.file_repository import FileRepository
from application.ports.issued_uploads import IssuedUploadRepository
from application.ports.job_queue import JobQueue, purge_deleted_upload_job
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from domain.errors import NotFound
from domain.files import FILE_NOT_FOUND, KnowledgeBaseFile, parse_file_id
from domain.knowledge_bases import KB_NOT_FOUND, parse_kb_id
from domain.uploads import PURGE_MARGIN, UploadState


@dataclass(frozen=True, slots=True)
class FileRef:
    """A file named by its knowledge base's id and its own uuid (lower case)."""

    kb_id: int
    file_id: str

    @classmethod
    def parse(cls, kb_id: object, file_id: object) -> FileRef:
        """`kb_id` a positive integer, then `file_id` a uuid (400 with the /kb/files messages)."""
        return cls(parse_kb_id(kb_id), parse_file_id(file_id))


async def find_file(
    knowledge_bases: KnowledgeBaseRepository,
    files: FileRepository,
    org_id: str,
    ref: FileRef,
) -> KnowledgeBaseFile:
    """The file `ref` names in `org_id`: 404 "Knowledge base not found" when the knowledge base
    is missing or another organization's, 404 "File not found" when the file is."""
    if await knowledge_bases.get(org_id, ref.kb_id) is None:
        raise NotFound(KB_NOT_FOUND)
    record = await files.get(org_id, ref.kb_id, ref.file_id)
    if record is None:
        raise NotFound(FILE_NOT_FOUND)
    return record


async def close_uploads(
    uploads: IssuedUploadRepository,
    jobs: JobQueue,
    org_id: str,
    file_ids: Sequence[str],
    now: datetime,
) -> None:
    """Mark the uploads of deleted files `deleted`, in the caller's unit of work, so that their
    addresses store nothing more through the service and their association is refused; for each
    address still valid, queue the job that empties the file's folder once it has expired (past
    `PURGE_MARGIN`): storage that takes the PUT itself (S3) may store a replay until then."""
    for upload in await uploads.set_state(org_id, file_ids, UploadState.DELETED):
        purge_at = upload.expires_at + PURGE_MARGIN
        if purge_at > now:
            await jobs.enqueue(purge_deleted_upload_job(org_id, upload.file_id, purge_at - now))
