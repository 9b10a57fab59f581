"""`ChatStreams` for one server process among several: runs produced here are read from
memory as they are emitted; runs produced by another process are read from the run log
(polled) as that process stores them.

Once a local reader has had the answer's first words, it takes what follows at most every
`coalesce` seconds (50 ms: twenty updates a second, smoother than any eye needs), merged into
one batch with the text deltas of a part joined, and the end at once. A model that streams a
token every few milliseconds then costs a write, a wake-up and a parse per batch instead of
per token, on the server and in the client.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from application.ports.chat_run_log import ChatRunLog
from domain.chat_stream import Chunk, compact, is_ending

POLL_INTERVAL = 0.1
KEEP_ALIVE_AFTER = 15.0
COALESCE = 0.05


@dataclass(slots=True)
class _LocalRun:
    chunks: list[Chunk] = field(default_factory=list)
    closed: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    def wake(self) -> None:
        # Readers wait on the event they saw; a fresh one is armed for the next change.
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()


class _Writer:
    def __init__(self, streams: InProcessChatStreams, run_id: str, run: _LocalRun) -> None:
        self._streams = streams
        self._run_id = run_id
        self._run = run

    def emit(self, chunk: Chunk) -> None:
        if self._run.closed:
            return
        self._run.chunks.append(chunk)
        self._run.wake()

    def close(self) -> None:
        if not self._run.closed:
            self._run.closed = True
            self._run.ended.set()
            self._run.wake()
            self._streams.forget(self._run_id, self._run)


class InProcessChatStreams:
    """Live readers of runs being produced, here or elsewhere."""

    def __init__(
        self,
        runs: ChatRunLog,
        *,
        poll_interval: float = POLL_INTERVAL,
        idle: float = KEEP_ALIVE_AFTER,
        coalesce: float = COALESCE,
    ) -> None:
        self._runs = runs
        self._poll_interval = poll_interval
        self._idle = idle
        self._coalesce = coalesce
        self._local: dict[str, _LocalRun] = {}

    def open(self, run_id: str) -> _Writer:
        run = _LocalRun()
        self._local[run_id] = run
        return _Writer(self, run_id, run)

    def forget(self, run_id: str, run: _LocalRun) -> None:
        # A reader attached before the close keeps its reference and reads to the end; later
        # readers find the finished run in the log.
        if self._local.get(run_id) is run:
            del self._local[run_id]

    @property
    def local_runs(self) -> int:
        return len(self._local)

    def follow(self, org_id: str, run_id: str) -> AsyncIterator[list[Chunk]]:
        run = self._local.get(run_id)
        if run is not None:
            return self._follow_local(run)
        return self._follow_log(org_id, run_id)

    async def _follow_local(self, run: _LocalRun) -> AsyncIterator[list[Chunk]]:
        loop = asyncio.get_running_loop()
        index = 0
        spoken_at: float | None = None
        while True:
            changed = run.changed
            if index < len(run.chunks):
                hold = 0.0
                if spoken_at is not None and not run.closed:
                    hold = spoken_at + self._coalesce - loop.time()
                if hold > 0:
                    # More of the answer is on its way: gather it, but never hold back the end.
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(hold):
                            await run.ended.wait()
                    continue
                batch = run.chunks[index:]
                index += len(batch)
                if spoken_at is not None or any(c["type"] == "text-delta" for c in batch):
                    spoken_at = loop.time()
                yield compact(batch)
                continue
            if run.closed:
                return
            try:
                async with asyncio.timeout(self._idle):
                    await changed.wait()
            except TimeoutError:
                yield []

    async def _follow_log(self, org_id: str, run_id: str) -> AsyncIterator[list[Chunk]]:
        loop = asyncio.get_running_loop()
        seen = -1
        quiet_since = loop.time()
        while True:
            chunks, status = await self._runs.read(org_id, run_id, after_seq=seen)
            if chunks:
                seen += len(chunks)
                quiet_since = loop.time()
                ending = next((i for i, c in enumerate(chunks) if is_ending(c)), None)
                if ending is not None:
                    yield chunks[: ending + 1]
                    return
                yield chunks
                continue
            if status is None or status.terminal:
                return
            if loop.time() - quiet_since >= self._idle:
                quiet_since = loop.time()
                yield []
            await asyncio.sleep(self._poll_interval)
