from __future__ import annotations

from dataclasses import dataclass

from application.files import FileRef, find_file
from application.ports.file_repository import FileRepository
from application.ports.job_queue import JobQueue, process_file_job
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.unit_of_work import UnitOfWork
from domain.files import KnowledgeBaseFile
from domain.identity import Caller


@dataclass(frozen=True, slots=True, kw_only=True)
class ReprocessFileCommand:
    caller: Caller
    file: FileRef

    @classmethod
    def parse(cls, *, caller: Caller, kb_id: object, file_id: object) -> ReprocessFileCommand:
        """The file named (`FileRef.parse`)."""
        return cls(caller=caller, file=FileRef.parse(kb_id, file_id))


class ReprocessFile:
    """Process a file again from its stored original, whatever state it is in.

    Rules: the knowledge base and the file must exist in the caller's organization (404
    each). The file goes back to `parsing` with no error and a fresh
    run count, and a processing job is queued in the same transaction (no second job while one
    is already waiting).
    """

    def __init__(
        self,
        knowledge_bases: KnowledgeBaseRepository,
        files: FileRepository,
        jobs: JobQueue,
        uow: UnitOfWork,
    ) -> None:
        self._kbs = knowledge_bases
        self._files = files
        self._jobs = jobs
        self._uow = uow

    async def execute(self, command: ReprocessFileCommand) -> KnowledgeBaseFile:
        org_id = command.caller.org_id
        file = await find_file(self._kbs, self._files, org_id, command.file)
        await self._files.restart(org_id, file.id)
        await self._jobs.enqueue(process_file_job(org_id, file.id))
        await self._uow.commit()
        restarted = await self._files.get_by_id(org_id, file.id)
        assert restarted is not None
        return restarted
