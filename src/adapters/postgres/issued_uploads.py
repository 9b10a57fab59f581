"""`IssuedUploadRepository` in Postgres (migration 0019)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from adapters.postgres.database import OrgConnection
from domain.uploads import IssuedUpload, UploadState

INSERT = """
    INSERT INTO issued_uploads (org_id, file_id, file_key, content_type, expires_at, state)
    VALUES ($1, $2, $3, $4, $5, $6)"""
GET = """
    SELECT org_id, file_id::text, file_key, content_type, expires_at, state
    FROM issued_uploads WHERE org_id = $1 AND file_id = $2"""
SET_STATE = """
    UPDATE issued_uploads SET state = $3, updated_at = now()
    WHERE org_id = $1 AND file_id = ANY($2::uuid[])
    RETURNING org_id, file_id::text, file_key, content_type, expires_at, state"""


def _upload(r: Any) -> IssuedUpload:
    return IssuedUpload(
        org_id=r[0], file_id=r[1], file_key=r[2], content_type=r[3], expires_at=r[4],
        state=UploadState(r[5]),
    )  # fmt: skip


class PgIssuedUploadRepository:
    """`IssuedUploadRepository` in Postgres."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def add(self, upload: IssuedUpload) -> None:
        await self._db.execute(
            INSERT, upload.org_id, uuid.UUID(upload.file_id), upload.file_key,
            upload.content_type, upload.expires_at, upload.state.value,
        )  # fmt: skip

    async def get(
        self, org_id: str, file_id: str, *, for_update: bool = False
    ) -> IssuedUpload | None:
        key = uuid.UUID(file_id)
        if for_update:
            rows = await self._db.fetch_in_transaction(GET + " FOR UPDATE", org_id, key)
        else:
            rows = await self._db.fetch(GET, org_id, key)
        return _upload(rows[0]) if rows else None

    async def set_state(
        self, org_id: str, file_ids: Sequence[str], state: UploadState
    ) -> list[IssuedUpload]:
        if not file_ids:
            return []
        rows = await self._db.fetch_in_transaction(
            SET_STATE, org_id, [uuid.UUID(f) for f in file_ids], state.value
        )
        return [_upload(r) for r in rows]
