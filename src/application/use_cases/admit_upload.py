from __future__ import annotations

from dataclasses import dataclass

from application.ports.issued_uploads import IssuedUploadRepository
from domain.errors import Conflict, Forbidden
from domain.uploads import (
    UPLOAD_ALREADY_USED,
    UPLOAD_FILE_DELETED,
    UPLOAD_NOT_ISSUED,
    UploadState,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmitUploadCommand:
    org_id: str
    file_id: str
    file_key: str


class AdmitUpload:
    """Decide whether a signed upload may still store its object, before a byte of it is
    written (the local-disk storage's own upload endpoint asks, once the signature holds).

    Rules: the upload was issued by `CreateUpload` for this file id and key, else 403 "This
    upload was not issued by POST /upload/presigned"; its file is not in a knowledge base yet,
    else 409 "This upload address has already been used"; nor deleted, else 409 "The file this
    upload was issued for has been deleted". An address replayed after its file was associated
    or deleted therefore stores nothing. Reads only: nothing is committed.
    """

    def __init__(self, uploads: IssuedUploadRepository) -> None:
        self._uploads = uploads

    async def execute(self, command: AdmitUploadCommand) -> None:
        issued = await self._uploads.get(command.org_id, command.file_id)
        if issued is None or issued.file_key != command.file_key:
            raise Forbidden(UPLOAD_NOT_ISSUED)
        if issued.state is UploadState.ASSOCIATED:
            raise Conflict(UPLOAD_ALREADY_USED)
        if issued.state is UploadState.DELETED:
            raise Conflict(UPLOAD_FILE_DELETED)
