from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from domain.uploads import IssuedUpload, UploadState


class IssuedUploadRepository(Protocol):
    """The signed upload addresses handed out to an organization, one per file id, and what
    became of each one's file; in the caller's unit of work."""

    async def add(self, upload: IssuedUpload) -> None:
        """Record an upload just issued."""
        ...

    async def get(
        self, org_id: str, file_id: str, *, for_update: bool = False
    ) -> IssuedUpload | None:
        """The upload issued for `file_id`, or None; with `for_update`, locked until the unit
        of work ends."""
        ...

    async def set_state(
        self, org_id: str, file_ids: Sequence[str], state: UploadState
    ) -> list[IssuedUpload]:
        """Move the uploads of `file_ids` that were recorded to `state`; those moved, as they
        are now."""
        ...
