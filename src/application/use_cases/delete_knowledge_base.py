from __future__ import annotations

from dataclasses import dataclass

from application.files import close_uploads
from application.ports.clock import Clock
from application.ports.file_repository import FileRepository
from application.ports.issued_uploads import IssuedUploadRepository
from application.ports.job_queue import JobQueue
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.object_storage import ObjectStorage
from application.ports.unit_of_work import UnitOfWork
from domain.errors import NotFound
from domain.files import file_folder
from domain.identity import Caller
from domain.knowledge_bases import KB_NOT_FOUND, parse_kb_id


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteKnowledgeBaseCommand:
    caller: Caller
    kb_id: int

    @classmethod
    def parse(cls, *, caller: Caller, kb_id: object) -> DeleteKnowledgeBaseCommand:
        """A well-formed id (400 "Valid knowledge base ID is required")."""
        return cls(caller=caller, kb_id=parse_kb_id(kb_id))


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletionReport:
    """What a deletion removed, and the stored folders it could not remove (left for retry)."""

    files_removed: int
    leftover_prefixes: list[str]


class DeleteKnowledgeBase:
    """Delete a knowledge base of the caller's organization with its files and their objects.

    Rules: the database rows go first, in one transaction, so a failure leaves the knowledge
    base whole; the files' uploads are marked deleted in it (`close_uploads`); the stored
    objects (originals, text, page images) are removed after the commit, and any folder that
    could not be removed is reported rather than failing the deletion.
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

    async def execute(self, command: DeleteKnowledgeBaseCommand) -> DeletionReport:
        kb_id, org_id = command.kb_id, command.caller.org_id
        kb = await self._knowledge_bases.get(org_id, kb_id, for_update=True)
        if kb is None:
            raise NotFound(KB_NOT_FOUND)
        files = await self._files.list_for_knowledge_base(org_id, kb_id)
        await self._knowledge_bases.delete(org_id, kb_id)
        file_ids = [f.file_id for f in files]
        await close_uploads(self._uploads, self._jobs, org_id, file_ids, self._clock.now())
        await self._uow.commit()
        leftovers = await remove_folders(
            self._storage, [file_folder(org_id, f.file_id) for f in files]
        )
        return DeletionReport(files_removed=len(files), leftover_prefixes=leftovers)


async def remove_folders(storage: ObjectStorage, prefixes: list[str]) -> list[str]:
    """Delete each folder's objects; return the folders whose deletion failed."""
    leftovers: list[str] = []
    for prefix in prefixes:
        try:
            await storage.delete_prefix(prefix)
        except Exception:
            leftovers.append(prefix)
    return leftovers
