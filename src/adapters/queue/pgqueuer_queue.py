"""The job queue on pgqueuer, written through the request's own connection and transaction."""

from __future__ import annotations

import json

from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
from pgqueuer.queries import Queries

from adapters.postgres.database import OrgConnection
from application.ports.job_queue import Job


class PgQueuerJobQueue:
    """`JobQueue` whose jobs commit or roll back with the unit of work's transaction."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def enqueue(self, job: Job) -> None:
        await self._db.begin()
        queries = Queries(AsyncpgDriver(self._db.raw))
        await queries.enqueue(
            job.kind,
            json.dumps(job.payload, separators=(",", ":")).encode(),
            priority=job.priority,
            execute_after=job.delay,
            dedupe_key=job.dedupe_key,
            on_conflict="skip",
        )
