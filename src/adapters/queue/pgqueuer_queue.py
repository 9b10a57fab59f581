"""The job queue on pgqueuer, written through the request's own connection and transaction."""

from __future__ import annotations

import json

from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
from pgqueuer.queries import Queries
from sqlalchemy.ext.asyncio import AsyncSession

from application.ports.job_queue import Job


class PgQueuerJobQueue:
    """`JobQueue` whose jobs commit or roll back with the session's transaction."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def enqueue(self, job: Job) -> None:
        connection = await self._session.connection()
        raw = await connection.get_raw_connection()
        queries = Queries(AsyncpgDriver(raw.driver_connection))
        await queries.enqueue(
            job.kind,
            json.dumps(job.payload, separators=(",", ":")).encode(),
            dedupe_key=job.dedupe_key,
            on_conflict="skip",
        )
