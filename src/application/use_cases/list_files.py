from __future__ import annotations

from dataclasses import dataclass

from application.ports.file_repository import FileRepository
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from domain.errors import NotFound
from domain.files import KnowledgeBaseFile
from domain.identity import Caller
from domain.ids import parse_positive_id
from domain.knowledge_bases import KB_ID_REQUIRED, KB_NOT_FOUND


@dataclass(frozen=True, slots=True, kw_only=True)
class ListFilesQuery:
    caller: Caller
    kb_id: object


class ListFiles:
    """List the files of one knowledge base of the caller's organization, newest first.

    Rules: `kb_id` must be a positive integer (400 "Valid knowledge base ID is required"); a
    knowledge base that is missing or belongs to another organization is 404 "Knowledge base
    not found".
    """

    def __init__(self, knowledge_bases: KnowledgeBaseRepository, files: FileRepository) -> None:
        self._knowledge_bases = knowledge_bases
        self._files = files

    async def execute(self, query: ListFilesQuery) -> list[KnowledgeBaseFile]:
        kb_id = parse_positive_id(query.kb_id, KB_ID_REQUIRED)
        if await self._knowledge_bases.get(query.caller.org_id, kb_id) is None:
            raise NotFound(KB_NOT_FOUND)
        return await self._files.list_for_knowledge_base(query.caller.org_id, kb_id)
