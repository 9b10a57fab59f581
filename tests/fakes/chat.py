"""Fakes for the chat ports: a scripted chat model, the run log, the usage ledger, search."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from application.metering import MeteredCall, SpendMeter
from application.ports.chat_model import (
    CallMeter,
    ChatEvent,
    ChatModelInfo,
    ChatModelUnavailable,
    ChatRequest,
    Finished,
    TextDelta,
    Usage,
)
from application.ports.chat_run_log import RunState
from domain.chat_stream import Chunk
from domain.chunks import SearchResult
from domain.conversations import StreamStatus
from domain.identity import Caller
from domain.search import Filter
from domain.spend import CapPeriod, CapStatus, Period
from domain.usage import AbandonedCall, PendingCall, PriceList, UsageEntry, UsagePurpose
from tests.fakes.basics import FakeClock

if TYPE_CHECKING:
    from application.ports.chat_model import ChatModel, ChatModelRegistry
    from application.ports.chat_run_log import ChatRunLog
    from application.ports.chat_streams import ChatStreamWriter
    from application.ports.knowledge_search import KnowledgeSearch
    from application.ports.usage_ledger import UsageLedger

ScriptItem = ChatEvent | Exception | float
Script = Sequence[ScriptItem]
"""What a scripted call yields: events; an exception is raised there; a float sleeps that long."""


def text_script(*pieces: str, usage: tuple[int, int] | None = (12, 3)) -> list[ScriptItem]:
    script: list[ScriptItem] = [TextDelta(p) for p in pieces]
    if usage is not None:
        script.append(Usage(*usage))
    script.append(Finished("stop"))
    return script


class ScriptedChatModel:
    """Answers each call with the next script; records every request and whether each stream
    was closed."""

    def __init__(
        self, *scripts: Script, supports_tools: bool = False, context_tokens: int = 8192
    ) -> None:
        self.scripts = list(scripts)
        self.requests: list[ChatRequest] = []
        self.closed = 0
        self._info = ChatModelInfo(supports_tools=supports_tools, context_tokens=context_tokens)

    @property
    def info(self) -> ChatModelInfo:
        return self._info

    async def stream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        self.requests.append(request)
        script = self.scripts.pop(0) if self.scripts else text_script("(no more scripts)")
        try:
            for item in script:
                if isinstance(item, Exception):
                    raise item
                if isinstance(item, float):
                    await asyncio.sleep(item)
                    continue
                yield item
        finally:
            self.closed += 1


class ScriptedChatRegistry:
    def __init__(self, model: ScriptedChatModel | Callable[[], ScriptedChatModel]) -> None:
        self._model = model
        self.asked: list[str] = []

    def get(self, model: str) -> ScriptedChatModel:
        self.asked.append(model)
        if not model.startswith(("local:", "openai:")):
            raise ChatModelUnavailable(f"Unknown chat model '{model}'.")
        return self._model if isinstance(self._model, ScriptedChatModel) else self._model()


STALLED = (
    "The response stopped before it finished (the server producing it went away). "
    "Send the message again to retry."
)


class FakeRunLog:
    """Keeps runs in memory; a run in `cancel_requested` gets a cancel at its next append or
    heartbeat. `alive_at` holds each run's last sign of life (`time.monotonic()`)."""

    def __init__(self) -> None:
        self.chunks: dict[str, list[Chunk]] = {}
        self.parts: dict[str, list[dict[str, Any]]] = {}
        self.status: dict[str, StreamStatus] = {}
        self.errors: dict[str, str | None] = {}
        self.cancel_requested: set[str] = set()
        self.alive_at: dict[str, float] = {}
        self.appends = 0
        self.heartbeats = 0
        self.stall_checks = 0

    def start(self, run_id: str) -> None:
        self.chunks[run_id] = []
        self.status[run_id] = StreamStatus.IN_PROGRESS
        self.alive_at[run_id] = time.monotonic()

    def reap(self, run_id: str, error: str = STALLED) -> None:
        """What the worker's reaper does to a stalled run: failed, with no chunk stored."""
        self.status[run_id] = StreamStatus.FAILED
        self.errors[run_id] = error

    def _store(self, run_id: str, first_seq: int, chunks: Sequence[Chunk]) -> None:
        stored = self.chunks.setdefault(run_id, [])
        assert first_seq == len(stored), "chunks must be stored in order, without gaps"
        stored.extend(chunks)

    async def append(
        self,
        org_id: str,
        run_id: str,
        *,
        first_seq: int,
        chunks: Sequence[Chunk],
        parts: list[dict[str, Any]],
    ) -> bool:
        self.appends += 1
        self._store(run_id, first_seq, chunks)
        self.parts[run_id] = [dict(p) for p in parts]
        self.alive_at[run_id] = time.monotonic()
        return run_id in self.cancel_requested

    async def heartbeat(self, org_id: str, run_id: str) -> bool:
        self.heartbeats += 1
        self.alive_at[run_id] = time.monotonic()
        return run_id in self.cancel_requested

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
        self._store(run_id, first_seq, chunks)
        self.parts[run_id] = [dict(p) for p in parts]
        self.status[run_id] = status
        self.errors[run_id] = error

    async def read(
        self, org_id: str, run_id: str, *, after_seq: int
    ) -> tuple[list[Chunk], StreamStatus | None]:
        return self.chunks.get(run_id, [])[after_seq + 1 :], self.status.get(run_id)

    async def fail_if_stalled(
        self, org_id: str, run_id: str, *, stale_after: float
    ) -> RunState | None:
        self.stall_checks += 1
        status = self.status.get(run_id)
        if status is None:
            return None
        silent_for = time.monotonic() - self.alive_at.get(run_id, time.monotonic())
        if status is StreamStatus.IN_PROGRESS and silent_for >= stale_after:
            self.reap(run_id)
        return RunState(
            status=self.status[run_id], error=self.errors.get(run_id), silent_for=silent_for
        )


class FakeUsageLedger:
    """The ledger in memory, with the caps of `ap_reserve_spend` (all entries fall in every
    period: tests run within one day)."""

    def __init__(self, caps: dict[CapPeriod, Decimal] | None = None) -> None:
        self.entries: list[UsageEntry] = []
        self.caps = dict(caps or {})
        self.reserved: dict[str, Decimal] = {}
        self.settled: list[str] = []
        self.released: list[str] = []
        self.calls: dict[str, tuple[str, PendingCall]] = {}
        self.abandon: list[AbandonedCall] = []
        """What `abandoned` returns (a test sets it)."""

    async def record(self, entry: UsageEntry, *, settles: str | None = None) -> None:
        self.entries.append(entry)
        if settles is not None:
            self.reserved.pop(settles, None)
            self.settled.append(settles)

    async def reserve(
        self,
        org_id: str,
        reservation_id: str,
        amount: Decimal,
        *,
        ttl: timedelta,
        periods: Mapping[CapPeriod, Period],
        call: PendingCall,
    ) -> list[CapStatus]:
        self.calls[reservation_id] = (org_id, call)
        if not self.caps:
            return []
        committed = sum((e.cost_usd for e in self.entries if e.org_id == org_id), Decimal(0)) + sum(
            self.reserved.values(), Decimal(0)
        )
        breaches = [
            CapStatus(period=p, cap=cap, spent=committed, resets_at=periods[p].resets_at)
            for p, cap in self.caps.items()
            if committed >= cap
        ]
        if not breaches:
            self.reserved[reservation_id] = amount
        return breaches

    async def resize(
        self, org_id: str, reservation_id: str, amount: Decimal, *, prompt_tokens: int | None = None
    ) -> None:
        if reservation_id in self.reserved:
            self.reserved[reservation_id] = amount

    async def release(self, org_id: str, reservation_id: str) -> None:
        self.reserved.pop(reservation_id, None)
        self.released.append(reservation_id)

    async def abandoned(self, quiet: timedelta, limit: int) -> list[AbandonedCall]:
        found, self.abandon = self.abandon[:limit], self.abandon[limit:]
        return found

    async def spent(
        self, org_id: str, periods: Mapping[CapPeriod, Period]
    ) -> dict[CapPeriod, Decimal]:
        total = sum((e.cost_usd for e in self.entries if e.org_id == org_id), Decimal(0))
        return dict.fromkeys(CapPeriod, total)


def fake_meter(
    ledger: FakeUsageLedger | None = None, prices: PriceList | None = None
) -> SpendMeter:
    """A `SpendMeter` on an in-memory ledger (a fresh one by default)."""
    return SpendMeter(ledger or FakeUsageLedger(), prices or PriceList(), FakeClock())


class FakeKnowledgeSearch:
    """Answers every search with `results`, recording each search's knowledge bases, query and
    count in `queries` and its filters in `filters` (the filters are not applied)."""

    def __init__(self, results: list[SearchResult] | None = None) -> None:
        self.results = results or []
        self.queries: list[tuple[list[int], str, int]] = []
        self.filters: list[Filter | None] = []

    async def search(
        self,
        caller: Caller,
        kb_ids: list[int],
        query: str,
        top_k: int,
        *,
        filters: Filter | None = None,
    ) -> list[SearchResult]:
        self.queries.append((list(kb_ids), query, top_k))
        self.filters.append(filters)
        return self.results[:top_k]


class RecordingWriter:
    """A `ChatStreamWriter` that keeps what was emitted."""

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        self.closed = False

    def emit(self, chunk: Chunk) -> None:
        assert not self.closed, "emit after close"
        self.chunks.append(chunk)

    def close(self) -> None:
        self.closed = True

    @property
    def types(self) -> list[str]:
        return [c["type"] for c in self.chunks]


if TYPE_CHECKING:  # mypy checks each fake against the port it stands in for
    _chat_model: ChatModel = ScriptedChatModel()
    _chat_registry: ChatModelRegistry = ScriptedChatRegistry(ScriptedChatModel())
    _run_log: ChatRunLog = FakeRunLog()
    _usage_ledger: UsageLedger = FakeUsageLedger()
    _knowledge_search: KnowledgeSearch = FakeKnowledgeSearch()
    _writer: ChatStreamWriter = RecordingWriter()


def unmetered() -> CallMeter:
    """A `CallMeter` that admits every call (an organization without caps), for tests of
    adapters that take one."""
    return fake_meter().scope(
        MeteredCall(
            org_id="org_test",
            user_id=None,
            thread_id=None,
            purpose=UsagePurpose.EXTRACTION,
            model="openai:test",
        )
    )
