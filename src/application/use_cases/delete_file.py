from __future__ import annotations

from dataclasses import dataclass

from application.files import FileRef, close_uploads, find_file
from application.ports.clock import Clock
from application.ports.file_repository import FileRepository
from application.ports.issued_uploads import IssuedUploadRepository
from application.ports.job_queue import JobQueue
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.object_storage import ObjectStorage
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.delete_knowledge_base import DeletionReport, remove_folders
from domain.files import file_folder
from domain.identity import Caller


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteFileCommand:
    caller: Caller
    file: FileRef

    @classmethod
    def parse(cls, *, caller: Caller, kb_id: object, file_id: object) -> DeleteFileCommand:
        """The file named (`FileRef.parse`)."""
        return cls(caller=caller, file=FileRef.parse(kb_id, file_id))


class DeleteFile:
    """Remove one file from a knowledge base: its record (and chunks), then its stored objects.

    Rules: the knowledge base and the file must exist in the caller's organization (404
    each). The record goes in one transaction, with the file's upload marked deleted (its
    signed address stores nothing more, `close_uploads`); the objects are removed after the
    commit, failures reported, not raised.
    """

    def __init__(
        self,
        knowledge_bases: KnowledgeBaseRepository,
        files: FileRepository,
        storage: ObjectStorage,
        uow: UnitOfWork,
        uploads: IssuedUploadRepository,
        jobs: JobQueue,
        clock: Clock,
    ) -> None:
        self._knowledge_bases = knowledge_bases
        self._files = files
        self._storage = storage
        self._uow = uow
        self._uploads = uploads
        self._jobs = jobs
        self._clock = clock

    async def execute(self, command: DeleteFileCommand) -> DeletionReport:
        org_id = command.caller.org_id
        record = await find_file(self._knowledge_bases, self._files, org_id, command.file)
        await self._files.delete(org_id, record.id)
        await close_uploads(self._uploads, self._jobs, org_id, [record.file_id], self._clock.now())
        await self._uow.commit()
        leftovers = await remove_folders(self._storage, [file_folder(org_id, record.file_id)])
        return DeletionReport(files_removed=1, leftover_prefixes=leftovers)
