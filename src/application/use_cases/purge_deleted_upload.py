from __future__ import annotations

from dataclasses import dataclass

from application.ports.issued_uploads import IssuedUploadRepository
from application.ports.object_storage import ObjectStorage
from domain.files import file_folder
from domain.uploads import UploadState


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeDeletedUploadCommand:
    org_id: str
    file_id: str


class PurgeDeletedUpload:
    """Empty a deleted file's folder once its upload address has expired (the worker's
    `upload.purge` job, queued by the deletion): where the storage takes a signed PUT itself
    (S3), a replay of the address between the deletion and its expiry may have stored an object
    that no record names.

    Rules: only a file whose upload is `deleted` is touched (its association is refused for
    good, so nothing in its folder can be wanted); a storage failure is raised, and the job is
    tried again.
    """

    def __init__(self, uploads: IssuedUploadRepository, storage: ObjectStorage) -> None:
        self._uploads = uploads
        self._storage = storage

    async def execute(self, command: PurgeDeletedUploadCommand) -> int:
        """How many objects were removed."""
        issued = await self._uploads.get(command.org_id, command.file_id)
        if issued is None or issued.state is not UploadState.DELETED:
            return 0
        return await self._storage.delete_prefix(file_folder(command.org_id, command.file_id))
