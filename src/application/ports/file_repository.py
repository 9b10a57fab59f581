from __future__ import annotations

from typing import Protocol

from domain.files import KnowledgeBaseFile, NewFile


class FileRepository(Protocol):
    """File records of knowledge bases, scoped to one organization like every repository."""

    async def add(self, new: NewFile) -> KnowledgeBaseFile:
        """Insert a file record in state `parsing`.

        Raises `Conflict` when the same file id is already associated with that knowledge base.
        """
        ...

    async def list_for_knowledge_base(self, org_id: str, kb_id: int) -> list[KnowledgeBaseFile]:
        """The knowledge base's files, newest first."""
        ...

    async def get(self, org_id: str, kb_id: int, file_id: str) -> KnowledgeBaseFile | None:
        """One file of a knowledge base by its file id (uuid), or None."""
        ...

    async def delete(self, org_id: str, record_id: int) -> None:
        """Delete one file record (and, in later stages, its chunks)."""
        ...
