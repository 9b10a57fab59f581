"""Upload step 1 (`POST /upload/presigned`) and, for local-disk storage, step 2: the signed
`PUT /storage/{key}` itself (used once: a second PUT to a key already uploaded is 409, and so is
one whose file was associated or deleted since, `AdmitUpload`), and the signed
`GET /storage/{key}` that `GET /kb/files/download` redirects to."""

from __future__ import annotations

import re
from typing import Any

from dishka import FromDishka
from litestar import Request, Response, get, post, put
from litestar.params import FromPath, JSONBody
from litestar.response import File

from adapters.storage.disposition import attachment
from adapters.storage.local_disk import UPLOAD_PATH, LocalDiskStorage
from application.ports.clock import Clock
from application.use_cases.admit_upload import AdmitUpload, AdmitUploadCommand
from application.use_cases.create_upload import CreateUpload, CreateUploadCommand
from domain.errors import Forbidden, Invalid
from domain.identity import Caller, Identity
from domain.uploads import UPLOAD_NOT_ISSUED, upload_key_owner
from entrypoints.http.injection import inject
from entrypoints.http.knowledge_base_schemas import PresignBody, PresignResponse, UploadReceipt
from entrypoints.http.openapi import errors
from entrypoints.http.schemas import command
from entrypoints.wiring import OrgScopes

_LENGTH = re.compile(r"[0-9]{1,19}")
UPLOADER = "system:upload"


@post(
    "/upload/presigned",
    status_code=200,
    tags=["Files"],
    responses=errors(400, 403),
    summary="Get a signed upload address (upload step 1)",
)
@inject
async def presign_upload(
    data: JSONBody[PresignBody], caller: FromDishka[Caller], use_case: FromDishka[CreateUpload]
) -> PresignResponse:
    prepared = await use_case.execute(command(CreateUploadCommand.parse, data, caller=caller))
    return PresignResponse.of(prepared)


@put(
    f"{UPLOAD_PATH}/{{key:path}}",
    tags=["Files"],
    request_max_body_size=None,
    responses=errors(400, 403, 409, 413),
    summary="Send a file's bytes to a signed address (upload step 2, local-disk storage)",
    description="Refused with 409 once the address was used, or once its file was associated "
    "with a knowledge base or deleted; with 403 for a bad, expired or unissued signature.",
    security=[],
)
@inject
async def receive_upload(
    request: Request[Any, Any, Any],
    key: FromPath[str],
    storage: FromDishka[LocalDiskStorage],
    clock: FromDishka[Clock],
    scopes: FromDishka[OrgScopes],
) -> Response[UploadReceipt]:
    key = key.lstrip("/")
    query = request.query_params
    size = storage.check_signature(
        key,
        content_type=query.get("ct"),
        size=query.get("size"),
        expires=query.get("exp"),
        signature=query.get("sig"),
        sent_content_type=request.headers.get("content-type"),
        now=clock.now(),
    )
    owner = upload_key_owner(key)
    if owner is None:
        raise Forbidden(UPLOAD_NOT_ISSUED)
    org_id, file_id = owner
    async with scopes.acting_as(Identity(user_id=UPLOADER, org_id=org_id)) as scope:
        await (await scope.get(AdmitUpload)).execute(
            AdmitUploadCommand(org_id=org_id, file_id=file_id, file_key=key)
        )
    length = request.headers.get("content-length")
    if length is not None and not _LENGTH.fullmatch(length):
        raise Invalid("Invalid Content-Length")
    stored = await storage.receive(
        key,
        request.stream(),
        content_type=query.get("ct", ""),
        size=size,
        declared=int(length) if length is not None else None,
    )
    return Response(
        UploadReceipt(success=True, file_key=stored.key, size=stored.size),
        status_code=200,
        headers={"ETag": f'"{stored.etag}"'},
    )


@get(
    f"{UPLOAD_PATH}/{{key:path}}",
    tags=["Files"],
    responses=errors(403, 404),
    summary="Read a stored object through a signed address (local-disk storage)",
    security=[],
    media_type="application/octet-stream",
    # An address the service hands out (a 302 from /kb/files/download), not an operation a
    # client calls by itself; documented there.
    include_in_schema=False,
)
@inject
async def serve_download(
    request: Request[Any, Any, Any],
    key: FromPath[str],
    storage: FromDishka[LocalDiskStorage],
    clock: FromDishka[Clock],
) -> File:
    query = request.query_params
    download = storage.check_download(
        key.lstrip("/"),
        expires=query.get("exp"),
        file_name=query.get("fn"),
        content_type=query.get("ct"),
        signature=query.get("sig"),
        now=clock.now(),
    )
    # Always an attachment, never rendered on the service's origin, whatever the type says.
    headers = {
        "Cache-Control": "private, no-store",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'; sandbox",
        "Content-Disposition": attachment(download.file_name)
        if download.file_name
        else "attachment",
    }
    return File(
        path=download.path,
        media_type=download.content_type,
        content_disposition_type="attachment",
        headers=headers,
    )
