"""`ChatStreams` for one server process among several: runs produced here are read from
memory as they are emitted; runs produced by another process are read from the run log
(polled) as that process stores them.

Once a local reader has had the answer's first words, it takes what follows at most every
`coalesce` seconds (50 ms: twenty updates a second, smoother than any eye needs), merged into
one batch with the text deltas of a part joined, and the end at once. A model that streams a
token every few milliseconds then costs a write, a wake-up and a parse per batch instead of
per token, on the server and in the client.

A reader of the log ends a run whose producer went away with an `error` chunk (and `finish`),
as soon as it is known dead: once its heartbeat is `stale_after` seconds old (producers beat
every 10 s) the reader fails it in the log itself rather than wait for the worker's reaper, and
a run the reaper failed, which the log holds no ending for, gets its stored error.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from application.ports.chat_run_log import ChatRunLog, RunState
from domain.chat_stream import Chunk, abort, compact, error, finish, is_ending, text_end
from domain.conversations import StreamStatus

POLL_INTERVAL = 0.1
KEEP_ALIVE_AFTER = 15.0
COALESCE = 0.05
STALE_AFTER = 30.0
STOPPED_UNEXPECTEDLY = "The response stopped unexpectedly. Please try again."


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
        stale_after: float = STALE_AFTER,
    ) -> None:
        self._runs = runs
        self._poll_interval = poll_interval
        self._idle = idle
        self._coalesce = coalesce
        self._stale_after = stale_after
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
        # Whether its producer is alive is asked once the stored chunks are read, then only when
        # its heartbeat could next be stale: every 20-30 s for a live one, not at every poll.
        check_at = quiet_since
        open_texts: set[str] = set()
        while True:
            chunks, status = await self._runs.read(org_id, run_id, after_seq=seen)
            if chunks:
                seen += len(chunks)
                quiet_since = loop.time()
                ending = next((i for i, c in enumerate(chunks) if is_ending(c)), None)
                if ending is not None:
                    yield chunks[: ending + 1]
                    return
                _track_texts(open_texts, chunks)
                yield chunks
                continue
            if status is None:
                return
            if status.terminal or loop.time() >= check_at:
                state = await self._runs.fail_if_stalled(
                    org_id, run_id, stale_after=self._stale_after
                )
                if state is None:
                    return
                if state.status.terminal:
                    if status.terminal:
                        yield _ending(state, open_texts)
                        return
                    # Failed here, or ended by its producer since the read: read what is left.
                    continue
                check_at = loop.time() + max(
                    self._stale_after - state.silent_for, self._poll_interval
                )
            if loop.time() - quiet_since >= self._idle:
                quiet_since = loop.time()
                yield []
            await asyncio.sleep(self._poll_interval)


def _track_texts(open_texts: set[str], chunks: list[Chunk]) -> None:
    for chunk in chunks:
        if chunk["type"] == "text-start":
            open_texts.add(chunk["id"])
        elif chunk["type"] == "text-end":
            open_texts.discard(chunk["id"])


def _ending(state: RunState, open_texts: set[str]) -> list[Chunk]:
    """The end of a run that ended without its producer storing one (failed as stalled): the
    text it was writing is closed, as its producer closes it when it fails."""
    closed = [text_end(part_id) for part_id in sorted(open_texts)]
    if state.status is StreamStatus.CANCELLED:
        return [*closed, abort()]
    return [*closed, error(state.error or STOPPED_UNEXPECTEDLY), finish()]
