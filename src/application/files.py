"""What the use cases on one file of a knowledge base share: which file a request names, and
finding it in the caller's organization."""

from __future__ import annotations

from dataclasses import dataclass

from application.ports.file_repository import FileRepository
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from domain.errors import NotFound
from domain.files import FILE_NOT_FOUND, KnowledgeBaseFile, parse_file_id
from domain.knowledge_bases import KB_NOT_FOUND, parse_kb_id


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
