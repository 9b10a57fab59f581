from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic

from application.ports.file_repository import FileRepository, View
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from domain.errors import NotFound
from domain.files import FileCursor, validate_file_page_limit
from domain.identity import Caller
from domain.knowledge_bases import KB_NOT_FOUND, parse_kb_id


# The two generic classes are not slotted: on Python 3.11 and 3.12, a frozen slotted dataclass
# made through its parametrized alias (`FilePage[X](...)`) raises TypeError as typing sets its
# `__orig_class__`.
@dataclass(frozen=True, kw_only=True)
class ListFilesQuery(Generic[View]):
    """`view` builds the caller's view of each file from its `FILE_VIEW_FIELDS`, given
    positionally (the HTTP response's struct, for one)."""

    caller: Caller
    kb_id: int
    view: Callable[..., View]
    limit: int | None = None
    after: FileCursor | None = None

    @classmethod
    def parse(
        cls,
        *,
        caller: Caller,
        kb_id: object,
        view: Callable[..., View],
        limit: object = None,
        cursor: object = None,
    ) -> ListFilesQuery[View]:
        """The id (400 "Valid knowledge base ID is required"), the page size (1 to 1000, or
        none for every file) and the cursor (one this service handed out), 400 each."""
        return cls(
            caller=caller,
            kb_id=parse_kb_id(kb_id),
            view=view,
            limit=validate_file_page_limit(limit),
            after=FileCursor.decode(cursor),
        )


@dataclass(frozen=True, kw_only=True)
class FilePage(Generic[View]):
    """The files listed, as the query's views; when a page was asked for (`paged`), the
    cursor of the next page (None on the last)."""

    files: list[View]
    paged: bool = False
    next_cursor: str | None = None


class ListFiles:
    """List the files of one knowledge base of the caller's organization, newest first.

    Rules: a knowledge base that is missing or belongs to another organization is 404
    "Knowledge base not found". Without `limit` every file is listed; with it a page at a time,
    after the cursor, stable while files are added.
    """

    def __init__(self, knowledge_bases: KnowledgeBaseRepository, files: FileRepository) -> None:
        self._knowledge_bases = knowledge_bases
        self._files = files

    async def execute(self, query: ListFilesQuery[View]) -> FilePage[View]:
        kb_id, limit, after = query.kb_id, query.limit, query.after
        org_id = query.caller.org_id
        if await self._knowledge_bases.get(org_id, kb_id) is None:
            raise NotFound(KB_NOT_FOUND)
        if limit is None:
            return FilePage(files=await self._files.list_views(org_id, kb_id, query.view))
        rows = await self._files.list_views(org_id, kb_id, query.view, limit=limit + 1, after=after)
        page = rows[:limit]
        next_cursor = None
        if len(rows) > limit:
            next_cursor = FileCursor(page[-1].created_at, page[-1].id).encode()
        return FilePage(files=page, paged=True, next_cursor=next_cursor)
