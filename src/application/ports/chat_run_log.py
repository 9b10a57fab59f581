from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from domain.chat_stream import Chunk
from domain.conversations import StreamStatus


@dataclass(frozen=True, slots=True, kw_only=True)
class RunState:
    """Where a run stands: its status, why it failed (when it did), and for how many seconds
    its producer has given no sign of life (a heartbeat or a store)."""

    status: StreamStatus
    error: str | None
    silent_for: float


class ChatRunLog(Protocol):
    """The persisted progress of assistant responses, written while they are produced.

    It works outside any request: each call is its own short transaction in the run's
    organization, so a response that takes minutes holds no database connection in between.
    Chunks are numbered from 0 in the order they were streamed; the assistant message's parts
    are rewritten with each append, so that what was produced survives any failure.
    A run whose producer went away (no heartbeat for a while) is failed as stalled, by the
    worker's reaper or sooner by a reader (`fail_if_stalled`); its chunks then hold no ending
    chunk, and its `error` says what happened.
    A run that has already ended (finished, or failed as stalled) or no longer exists (its
    conversation was deleted) takes no more writes: `append` and `heartbeat` then return True,
    as for a cancel, so that its producer stops; `finish` does nothing. None of them raises
    for it.
    """

    async def append(
        self,
        org_id: str,
        run_id: str,
        *,
        first_seq: int,
        chunks: Sequence[Chunk],
        parts: list[dict[str, Any]],
    ) -> bool:
        """Store chunks `first_seq…` and the message's parts so far, and mark the run alive.
        Returns True when a cancel was requested for the run (or it ended or is gone). Storing
        the same seqs again changes nothing."""
        ...

    async def heartbeat(self, org_id: str, run_id: str) -> bool:
        """Mark the run alive; returns True when a cancel was requested for it."""
        ...

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
        """Store the last chunks and parts and end the run, its message and the conversation's
        stream status with `status` (a terminal one)."""
        ...

    async def read(
        self, org_id: str, run_id: str, *, after_seq: int
    ) -> tuple[list[Chunk], StreamStatus | None]:
        """The run's chunks numbered above `after_seq` (-1 for all), and its status (None
        when the run does not exist)."""
        ...

    async def fail_if_stalled(
        self, org_id: str, run_id: str, *, stale_after: float
    ) -> RunState | None:
        """Fail the run as stalled when it is still in progress and its producer has given no
        sign of life for `stale_after` seconds (it went away), as the worker's reaper would:
        the run, its message and the conversation's stream status become failed, with the
        reaper's error. A producer still beating is never failed. Returns the run's state
        afterwards (None when the run does not exist); for a run not failed here, nothing
        changes."""
        ...
