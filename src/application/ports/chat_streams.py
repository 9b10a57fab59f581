from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from domain.chat_stream import Chunk


class ChatStreamWriter(Protocol):
    """Where a run being produced in this process publishes its chunks to live readers."""

    def emit(self, chunk: Chunk) -> None:
        """Hand `chunk` to every reader, at once; never blocks."""
        ...

    def close(self) -> None:
        """No more chunks: readers end after the ones already emitted."""
        ...


class ChatStreams(Protocol):
    """Live delivery of assistant responses to the clients reading them.

    A run produced in this process is read from memory as it is emitted; a run produced by
    another server process is read from the run log as it is stored. Either way a reader gets
    every chunk from the first, in order, in batches of what became available together (the
    text deltas of one part may come merged, as `chat_stream.compact` does), and the stream
    ends with the run. While nothing happens for a while, an empty batch says so
    (a transport sends a keep-alive for it).
    """

    def open(self, run_id: str) -> ChatStreamWriter:
        """Register a run about to be produced here; readers may attach from now on."""
        ...

    def follow(self, org_id: str, run_id: str) -> AsyncIterator[list[Chunk]]:
        """Every chunk of the run from the first, then the new ones until it ends."""
        ...
