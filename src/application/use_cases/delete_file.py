from __future__ import annotations

from dataclasses import dataclass

from application.ports.file_repository import FileRepository
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.object_storage import ObjectStorage
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.delete_knowledge_base import DeletionReport, remove_folders
from domain.errors import NotFound
from domain.files import FILE_ID_REQUIRED, FILE_NOT_FOUND, file_folder
from domain.identity import Caller
from domain.ids import parse_positive_id, parse_uuid
from domain.knowledge_bases import KB_ID_REQUIRED, KB_NOT_FOUND


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteFileCommand:
    caller: Caller
    kb_id: object
    file_id: object


class DeleteFile:
    """Remove one file from a knowledge base: its record (and chunks), then its stored objects.

    Rules: `kb_id` positive integer and `file_id` uuid (400 each); the knowledge base and the
    file must exist in the caller's organization (404 each). The record goes in one
    transaction; the objects are removed after the commit, failures reported, not raised.
    """

    def __init__(
        self,
        knowledge_bases: KnowledgeBaseRepository,
        files: FileRepository,
        storage: ObjectStorage,
        uow: UnitOfWork,
    ) -> None:
        self._knowledge_bases = knowledge_bases
        self._files = files
        self._storage = storage
        self._uow = uow

    async def execute(self, command: DeleteFileCommand) -> DeletionReport:
        kb_id = parse_positive_id(command.kb_id, KB_ID_REQUIRED)
        file_id = parse_uuid(command.file_id, FILE_ID_REQUIRED)
        org_id = command.caller.org_id
        if await self._knowledge_bases.get(org_id, kb_id) is None:
            raise NotFound(KB_NOT_FOUND)
        record = await self._files.get(org_id, kb_id, file_id)
        if record is None:
            raise NotFound(FILE_NOT_FOUND)
        await self._files.delete(org_id, record.id)
        await self._uow.commit()
        leftovers = await remove_folders(self._storage, [file_folder(org_id, file_id)])
        return DeletionReport(files_removed=1, leftover_prefixes=leftovers)
