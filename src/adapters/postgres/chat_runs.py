"""`ChatRunLog` in Postgres: the progress of assistant responses, written by the background
tasks producing them.

Each call checks out its own connection for the run's organization (through the fair gate, so
producers queue with requests rather than ahead of them) and runs one statement (two for
`fail_if_stalled`), each its own transaction: a response that takes minutes holds no
connection between writes.

A run whose heartbeats stopped is failed by `ap_fail_stalled_chat_runs`: for every such run by
the worker's reaper (`ap_reap_stalled_chat_runs`), for one run by `fail_if_stalled`, which runs
it as the app role so that it reaches only the organization's runs. A run that is no longer in
progress (finished, or failed so) or no longer exists (its conversation was deleted) takes no
more writes; `append` and `heartbeat` then answer True, telling the producer to stop, because
nothing it produces can be kept.

The log commits without waiting for its WAL to reach the disk (`synchronous_commit = off`):
it is written every ~150 ms per answer and on the way to `[DONE]`, and a flush per write would
be the largest part of each. What that risks is only a database crash's last moments of an
answer, after which the run is failed with what was stored; the data stays consistent.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import asyncpg

from adapters.postgres.database import FairGate, org_connection
from application.ports.chat_run_log import RunState
from domain.chat_stream import Chunk
from domain.conversations import StreamStatus

IN_PROGRESS = StreamStatus.IN_PROGRESS.value

# $3 first seq, $4 the chunks (one jsonb array), $5 the message's parts. A repeated append of
# the same seqs inserts nothing and leaves `chunk_count` where it was.
APPEND = f"""
    WITH run AS (
        UPDATE chat_runs SET chunk_count = greatest(chunk_count, $3 + jsonb_array_length($4)),
            heartbeat_at = now()
        WHERE org_id = $1 AND id = $2 AND status = '{IN_PROGRESS}'
        RETURNING message_id, cancel_requested
    ), chunks AS (
        INSERT INTO chat_run_chunks (run_id, seq, org_id, chunk)
        SELECT $2, $3 + (c.n - 1)::int, $1, c.chunk
        FROM run, jsonb_array_elements($4) WITH ORDINALITY AS c(chunk, n)
        ON CONFLICT (run_id, seq) DO NOTHING
    ), message AS (
        UPDATE chat_messages m SET parts = $5, updated_at = now()
        FROM run WHERE m.org_id = $1 AND m.id = run.message_id
    )
    SELECT cancel_requested FROM run"""
# As APPEND, plus $6 the terminal status and $7 the error. The conversation shows the run's
# end unless a newer run of it is under way.
FINISH = f"""
    WITH run AS (
        UPDATE chat_runs SET chunk_count = greatest(chunk_count, $3 + jsonb_array_length($4)),
            heartbeat_at = now(), status = $6, error = $7, finished_at = now()
        WHERE org_id = $1 AND id = $2 AND status = '{IN_PROGRESS}'
        RETURNING message_id, thread_id
    ), chunks AS (
        INSERT INTO chat_run_chunks (run_id, seq, org_id, chunk)
        SELECT $2, $3 + (c.n - 1)::int, $1, c.chunk
        FROM run, jsonb_array_elements($4) WITH ORDINALITY AS c(chunk, n)
        ON CONFLICT (run_id, seq) DO NOTHING
    ), message AS (
        UPDATE chat_messages m SET parts = $5, status = $6, error = $7, updated_at = now()
        FROM run WHERE m.org_id = $1 AND m.id = run.message_id
    ), thread AS (
        UPDATE conversations c SET stream_status = $6, updated_at = now()
        FROM run WHERE c.org_id = $1 AND c.thread_id = run.thread_id
          AND NOT EXISTS (
              SELECT 1 FROM chat_runs other
              WHERE other.org_id = $1 AND other.thread_id = run.thread_id AND other.id <> $2
                AND other.status = '{IN_PROGRESS}'
          )
    )
    SELECT count(*) FROM run"""
HEARTBEAT = f"""
    UPDATE chat_runs SET heartbeat_at = now()
    WHERE org_id = $1 AND id = $2 AND status = '{IN_PROGRESS}'
    RETURNING cancel_requested"""
READ = """
    SELECT r.status, c.chunk FROM chat_runs r
    LEFT JOIN chat_run_chunks c ON c.org_id = r.org_id AND c.run_id = r.id AND c.seq > $3
    WHERE r.org_id = $1 AND r.id = $2
    ORDER BY c.seq"""
# $1 the run, $2 how long without a heartbeat makes it stalled.
FAIL_IF_STALLED = "SELECT count(*) FROM ap_fail_stalled_chat_runs($2, $1)"
STATE = """
    SELECT status, error, extract(epoch FROM now() - heartbeat_at)::float8 FROM chat_runs
    WHERE org_id = $1 AND id = $2"""

_STATUS = {status.value: status for status in StreamStatus}


class PgChatRunLog:
    """`ChatRunLog` in Postgres, one short checkout per call."""

    def __init__(self, pool: asyncpg.Pool, gate: FairGate | None = None) -> None:
        self._pool = pool
        self._gate = gate

    async def _fetch(self, org_id: str, sql: str, *args: Any) -> list[asyncpg.Record]:
        async with org_connection(self._pool, org_id, self._gate, synchronous_commit=False) as db:
            return await db.fetch(sql, org_id, *args)

    async def append(
        self,
        org_id: str,
        run_id: str,
        *,
        first_seq: int,
        chunks: Sequence[Chunk],
        parts: list[dict[str, Any]],
    ) -> bool:
        rows = await self._fetch(org_id, APPEND, run_id, first_seq, list(chunks), parts)
        return bool(rows[0][0]) if rows else True

    async def heartbeat(self, org_id: str, run_id: str) -> bool:
        rows = await self._fetch(org_id, HEARTBEAT, run_id)
        return bool(rows[0][0]) if rows else True

    async def finish(
        self,
        org_id: str,
        run_id: str,
        *,
        status: StreamStatus,
        first_seq: int,
        chunks: Sequence[Chunk],
        parts: list[dict[str, Any]],
        error: str | None = None,
    ) -> None:
        if not status.terminal:
            raise ValueError(f"a run ends with a terminal status, not {status.value}")
        await self._fetch(
            org_id, FINISH, run_id, first_seq, list(chunks), parts, status.value, error
        )

    async def read(
        self, org_id: str, run_id: str, *, after_seq: int
    ) -> tuple[list[Chunk], StreamStatus | None]:
        rows = await self._fetch(org_id, READ, run_id, after_seq)
        if not rows:
            return [], None
        return [r[1] for r in rows if r[1] is not None], _STATUS[rows[0][0]]

    async def fail_if_stalled(
        self, org_id: str, run_id: str, *, stale_after: float
    ) -> RunState | None:
        async with org_connection(self._pool, org_id, self._gate, synchronous_commit=False) as db:
            await db.fetch(FAIL_IF_STALLED, run_id, timedelta(seconds=stale_after))
            rows = await db.fetch(STATE, org_id, run_id)
        if not rows:
            return None
        status, error, silent_for = rows[0]
        return RunState(status=_STATUS[status], error=error, silent_for=max(silent_for, 0.0))
