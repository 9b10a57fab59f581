from __future__ import annotations

from dataclasses import dataclass

from application.files import FileRef, find_file
from application.ports.clock import Clock
from application.ports.file_repository import FileRepository
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.object_storage import ObjectStorage
from domain.errors import Invalid, NotFound, field_error
from domain.identity import Caller
from domain.ids import parse_positive_id
from domain.uploads import (
    CONTENT_NOT_FOUND,
    DOWNLOAD_URL_TTL,
    PAGE_IMAGE_NOT_FOUND,
    PAGE_INVALID,
    PART_INVALID,
    DownloadPart,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class DownloadFileQuery:
    caller: Caller
    file: FileRef
    part: DownloadPart = DownloadPart.ORIGINAL
    page: int | None = None

    @classmethod
    def parse(
        cls,
        *,
        caller: Caller,
        kb_id: object,
        file_id: object,
        part: object = None,
        page: object = None,
    ) -> DownloadFileQuery:
        """The file named (`FileRef.parse`); `part` `original` (the default), `content` or
        `image` (400 otherwise); `page` a positive integer, required with `image` and refused
        without it (400)."""
        ref, chosen = FileRef.parse(kb_id, file_id), _part(part)
        return cls(caller=caller, file=ref, part=chosen, page=_page(page, chosen))


class DownloadFile:
    """A short-lived signed address of one stored part of a knowledge base's file.

    Rules: the knowledge base and the file must exist in the caller's organization (404 with
    the same bodies as the other /kb/files endpoints; a foreign one looks missing). `content`
    is 404 "File content not found" until the text has been extracted; a page beyond the
    file's `imageKeys` is 404 "Page image not found". The address expires after
    `DOWNLOAD_URL_TTL`; the original comes with its file name and content type.
    """

    def __init__(
        self,
        knowledge_bases: KnowledgeBaseRepository,
        files: FileRepository,
        storage: ObjectStorage,
        clock: Clock,
    ) -> None:
        self._knowledge_bases = knowledge_bases
        self._files = files
        self._storage = storage
        self._clock = clock

    async def execute(self, query: DownloadFileQuery) -> str:
        part, page = query.part, query.page
        record = await find_file(
            self._knowledge_bases, self._files, query.caller.org_id, query.file
        )
        expires_at = self._clock.now() + DOWNLOAD_URL_TTL
        if part is DownloadPart.ORIGINAL:
            key, name, kind = record.file_key, record.file_name, record.content_type
        elif part is DownloadPart.CONTENT:
            if await self._storage.stat(record.content_key) is None:
                raise NotFound(CONTENT_NOT_FOUND)
            key, name = record.content_key, f"{record.file_name}.md"
            kind = "text/markdown; charset=utf-8"
        else:
            images = record.image_keys or []
            if page is None or page > len(images):
                raise NotFound(PAGE_IMAGE_NOT_FOUND)
            key = images[page - 1]
            stem, dot, extension = key.rsplit("/", 1)[-1].rpartition(".")
            suffix = f".{extension}" if dot and stem else ""
            name, kind = f"{record.file_name}-page-{page}{suffix}", None
        return await self._storage.sign_download(
            key, expires_at=expires_at, file_name=name, content_type=kind
        )


def _part(value: object) -> DownloadPart:
    if value is None:
        return DownloadPart.ORIGINAL
    if isinstance(value, str):
        for part in DownloadPart:
            if value == part.value:
                return part
    raise Invalid(PART_INVALID, [field_error("part", "expected original, content or image")])


def _page(value: object, part: DownloadPart) -> int | None:
    if value is None:
        if part is DownloadPart.IMAGE:
            raise Invalid(PAGE_INVALID, [field_error("page", "required with part=image")])
        return None
    if part is not DownloadPart.IMAGE:
        raise Invalid(PAGE_INVALID, [field_error("page", "only with part=image")])
    try:
        return parse_positive_id(value, PAGE_INVALID)
    except Invalid:
        raise Invalid(PAGE_INVALID, [field_error("page", "expected a positive integer")]) from None
