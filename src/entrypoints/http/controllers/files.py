"""`/kb/files`: associate uploaded files with a knowledge base, list and remove them."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from dishka import FromDishka
from litestar import Controller, delete, get, post
from litestar.params import JSONBody, QueryParameter

from application.use_cases.associate_file import AssociateFile, AssociateFileCommand
from application.use_cases.delete_file import DeleteFile, DeleteFileCommand
from application.use_cases.list_files import ListFiles, ListFilesQuery
from application.use_cases.reprocess_file import ReprocessFile, ReprocessFileCommand
from domain.files import MAX_FILE_PAGE
from domain.identity import Caller
from entrypoints.http.injection import inject
from entrypoints.http.knowledge_base_schemas import (
    AssociateFileBody,
    FileListResponse,
    FileResponse,
    KnowledgeBaseFileOut,
    ReprocessBody,
)
from entrypoints.http.openapi import body_errors, errors
from entrypoints.http.params import FILE_ID, KB_ID
from entrypoints.http.schemas import SuccessMessage, command


class FileController(Controller):
    path = "/kb/files"
    tags = ["Knowledge Bases"]

    @post(
        status_code=201,
        responses=body_errors(403, 404, 409),
        summary="Associate an uploaded file with a knowledge base (upload step 3)",
    )
    @inject
    async def associate(
        self,
        data: JSONBody[AssociateFileBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[AssociateFile],
    ) -> FileResponse:
        record = await use_case.execute(command(AssociateFileCommand.parse, data, caller=caller))
        return FileResponse(success=True, file=KnowledgeBaseFileOut.of(record))

    @get(responses=errors(400, 403, 404), summary="List a knowledge base's files, newest first")
    @inject
    async def list_files(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[ListFiles],
        kb_id: Annotated[int, KB_ID],
        limit: Annotated[
            int | None,
            QueryParameter(
                name="limit",
                ge=1,
                le=MAX_FILE_PAGE,
                description="Page size; without it every file is listed",
            ),
        ] = None,
        cursor: Annotated[
            str | None,
            QueryParameter(name="cursor", description="The previous page's `nextCursor`"),
        ] = None,
    ) -> FileListResponse:
        page = await use_case.execute(
            ListFilesQuery.parse(
                caller=caller, kb_id=kb_id, view=KnowledgeBaseFileOut, limit=limit, cursor=cursor
            )
        )
        if not page.paged:
            return FileListResponse(success=True, files=page.files)
        return FileListResponse(success=True, files=page.files, next_cursor=page.next_cursor)

    @post(
        "/reprocess",
        status_code=202,
        responses=body_errors(403, 404),
        summary="Process a file again from its stored original",
    )
    @inject
    async def reprocess(
        self,
        data: JSONBody[ReprocessBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[ReprocessFile],
    ) -> FileResponse:
        record = await use_case.execute(command(ReprocessFileCommand.parse, data, caller=caller))
        return FileResponse(success=True, file=KnowledgeBaseFileOut.of(record))

    @delete(status_code=200, responses=errors(400, 403, 404), summary="Remove a file")
    @inject
    async def remove(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[DeleteFile],
        kb_id: Annotated[int, KB_ID],
        file_id: Annotated[UUID, FILE_ID],
    ) -> SuccessMessage:
        await use_case.execute(
            DeleteFileCommand.parse(caller=caller, kb_id=kb_id, file_id=str(file_id))
        )
        return SuccessMessage(success=True, message="File deleted")
