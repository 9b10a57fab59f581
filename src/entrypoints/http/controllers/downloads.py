"""`GET /kb/files/download`: a redirect to a short-lived signed address of a file's original,
its extracted text or one page image."""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from dishka import FromDishka
from litestar import get
from litestar.params import QueryParameter
from litestar.response import Redirect

from application.use_cases.download_file import DownloadFile, DownloadFileQuery
from domain.identity import Caller
from entrypoints.http.injection import inject
from entrypoints.http.openapi import KB_ID, errors


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
    file_id: Annotated[UUID, QueryParameter(name="fileId", description="The file's uuid")],
    part: Annotated[
        Literal["original", "content", "image"],
        QueryParameter(name="part", description="What to download", required=False),
    ] = "original",
    page: Annotated[
        int | None,
        QueryParameter(name="page", ge=1, le=100_000, description="The page, from 1 (image)"),
    ] = None,
) -> Redirect:
    url = await use_case.execute(
        DownloadFileQuery(caller=caller, kb_id=kb_id, file_id=str(file_id), part=part, page=page)
    )
    return Redirect(url, status_code=302, headers={"Cache-Control": "no-store"})
