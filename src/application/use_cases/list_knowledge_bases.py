from __future__ import annotations

from dataclasses import dataclass

from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from domain.identity import Caller
from domain.knowledge_bases import KnowledgeBaseSummary


@dataclass(frozen=True, slots=True, kw_only=True)
class ListKnowledgeBasesQuery:
    caller: Caller


class ListKnowledgeBases:
    """List every knowledge base of the caller's organization, newest first, with its file
    count, total size, last upload time and status computed from its files."""

    def __init__(self, knowledge_bases: KnowledgeBaseRepository) -> None:
        self._knowledge_bases = knowledge_bases

    async def execute(self, query: ListKnowledgeBasesQuery) -> list[KnowledgeBaseSummary]:
        return await self._knowledge_bases.list_summaries(query.caller.org_id)
