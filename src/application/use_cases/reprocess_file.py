from __future__ import annotations

from dataclasses import dataclass

from application.ports.file_repository import FileRepository
from application.ports.job_queue import JobQueue, process_file_job
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.unit_of_work import UnitOfWork
from domain.errors import NotFound
from domain.files import FILE_ID_REQUIRED, FILE_NOT_FOUND, KnowledgeBaseFile
from domain.identity import Caller
from domain.ids import parse_positive_id, parse_uuid
from domain.knowledge_bases import KB_ID_REQUIRED, KB_NOT_FOUND


@dataclass(frozen=True, slots=True, kw_only=True)
class ReprocessFileCommand:
    caller: Caller
    kb_id: object
    file_id: object


class ReprocessFile:
    """Process a file again from its stored original, whatever state it is in.

    Rules: `kb_id` positive integer and `file_id` uuid (400 each); both must exist in the
    caller's organization (404 each). The file goes back to `parsing` with no error and a fresh
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
        kb_id = parse_positive_id(command.kb_id, KB_ID_REQUIRED)
        file_id = parse_uuid(command.file_id, FILE_ID_REQUIRED)
        org_id = command.caller.org_id
        if await self._kbs.get(org_id, kb_id) is None:
            raise NotFound(KB_NOT_FOUND)
        file = await self._files.get(org_id, kb_id, file_id)
        if file is None:
            raise NotFound(FILE_NOT_FOUND)
        await self._files.restart(org_id, file.id)
        await self._jobs.enqueue(process_file_job(org_id, file.id))
        await self._uow.commit()
        restarted = await self._files.get_by_id(org_id, file.id)
        assert restarted is not None
        return restarted
