"""`GET /kb/files/download`: a redirect to a short-lived signed address of a file's original,
its extracted text or one page image."""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from dishka import FromDishka
from litestar import get
from litestar.response import Redirect

from application.use_cases.download_file import DownloadFile, DownloadFileQuery
from domain.identity import Caller
from domain.uploads import MAX_PAGE_NUMBER, PAGE_INVALID, PART_INVALID, DownloadPart
from entrypoints.http.injection import inject
from entrypoints.http.openapi import errors
from entrypoints.http.params import FILE_ID, KB_ID
from entrypoints.http.rules import ParamRule, RuledQuery, limit

PART = RuledQuery(
    name="part",
    description="What to download",
    required=False,
    rule=ParamRule(
        PART_INVALID, lambda raw: raw in {p.value for p in DownloadPart}, "unknown part"
    ),
)
PAGE = RuledQuery(
    name="page",
    ge=1,
    le=MAX_PAGE_NUMBER,
    description="The page, from 1 (image)",
    rule=ParamRule(PAGE_INVALID, limit(MAX_PAGE_NUMBER), "out of range"),
)


@get(
    "/kb/files/download",
    tags=["Knowledge Bases"],
    status_code=302,
    responses=errors(400, 403, 404),
    summary="Download a file's original, extracted text or page image (302 to a signed URL)",
)
@inject
async def download_file(
    caller: FromDishka[Caller],
    use_case: FromDishka[DownloadFile],
    kb_id: Annotated[int, KB_ID],
    file_id: Annotated[UUID, FILE_ID],
    part: Annotated[Literal["original", "content", "image"], PART] = "original",
    page: Annotated[int | None, PAGE] = None,
) -> Redirect:
    url = await use_case.execute(
        DownloadFileQuery.parse(
            caller=caller, kb_id=kb_id, file_id=str(file_id), part=part, page=page
        )
    )
    return Redirect(url, status_code=302, headers={"Cache-Control": "no-store"})
