from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from domain.chat_stream import Chunk
from domain.conversations import StreamStatus


class ChatRunLog(Protocol):
    """The persisted progress of assistant responses, written while they are produced.

    It works outside any request: each call is its own short transaction in the run's
    organization, so a response that takes minutes holds no database connection in between.
    Chunks are numbered from 0 in the order they were streamed; the assistant message's parts
    are rewritten with each append, so that what was produced survives any failure.
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
