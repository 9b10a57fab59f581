"""Starts and watches the local-model runner (`adapters.local_model.runner`) and speaks to it.

The runner is a child of the process that needs it (the server, or a worker). It is started
once and kept loaded, so an answer pays no load; when it exits, crashes or stops sending
tokens for `stall_timeout` seconds without using CPU meanwhile, the call in progress fails
with `STOPPED` and the runner is started again, after a pause that doubles with each quick
failure (0.5 s up to 30 s). Calls take turns: one runs while the others wait, in order,
without holding anything but their place in the queue; a call waiting while the runner
restarts runs on the new runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import sys
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from adapters.child_processes import Backoff, cpu_seconds, describe_exit
from adapters.local_model.protocol import (
    HEADER,
    MAX_FRAME,
    Cancel,
    Delta,
    Done,
    Failed,
    FromRunner,
    Generate,
    Ready,
    Turn,
    frame,
    from_runner,
)

STOPPED = "The local model stopped unexpectedly."
NOT_STARTED = "The local model could not be started."
log = structlog.get_logger("agent_platform.local_model")


class RunnerFailure(Exception):
    """A call could not be served; `message` is safe to show to the member."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class RunnerSettings:
    """How the runner is started and watched. `memory_limit` is bytes of address space (0:
    none); `stall_timeout` is how long a call may wait for its next token (the prompt's
    processing included) before the runner counts as hung, unless it used CPU meanwhile (then
    up to three more periods)."""

    threads: int = 2
    n_ctx: int = 4096
    memory_limit: int = 0
    stall_timeout: float = 60.0
    start_timeout: float = 120.0
    stop_timeout: float = 5.0


class RunnerProgress:
    """Whether a runner that sent no token for a stall period is still computing: a long
    prompt on a crowded machine keeps using CPU, a hung (stopped, deadlocked) runner does not.
    A busy runner gets `MAX_BUSY_PERIODS` periods without a token, then counts as hung too."""

    MAX_BUSY_PERIODS = 3
    MIN_CPU_SHARE = 0.05

    def __init__(self, pid: int | None, period: float) -> None:
        self._pid = pid
        self._period = period
        self.reset()

    def reset(self) -> None:
        self._busy_periods = 0
        self._cpu = cpu_seconds(self._pid) if self._pid is not None else None

    def still_working(self) -> bool:
        before = self._cpu
        self._cpu = cpu_seconds(self._pid) if self._pid is not None else None
        if before is None or self._cpu is None or self._busy_periods >= self.MAX_BUSY_PERIODS:
            return False
        if self._cpu - before < self.MIN_CPU_SHARE * self._period:
            return False
        self._busy_periods += 1
        log.warning("local_model.slow", seconds=self._period, busy_periods=self._busy_periods)
        return True


class _Call:
    __slots__ = ("ended", "events", "id")

    def __init__(self, call_id: int) -> None:
        self.id = call_id
        self.events: asyncio.Queue[FromRunner | None] = asyncio.Queue()
        self.ended = False


class LocalModelRunner:
    """One supervised runner process and the calls it serves, in this event loop."""

    def __init__(self, settings: RunnerSettings | None = None) -> None:
        self._settings = settings or RunnerSettings()
        self._turn = asyncio.Lock()
        self._ids = itertools.count(1)
        self._process: asyncio.subprocess.Process | None = None
        self._ready: asyncio.Future[Ready] | None = None
        self._active: _Call | None = None
        self._supervising: asyncio.Task[None] | None = None
        self._closing = False
        self._closed = asyncio.Event()
        self.starts = 0

    @property
    def pid(self) -> int | None:
        """The running runner's process id (None while none runs)."""
        process = self._process
        return process.pid if process is not None and process.returncode is None else None

    def start(self) -> None:
        """Start the runner in the background (idempotent); calls also start it."""
        if self._closing:
            raise RunnerFailure(NOT_STARTED)
        if self._supervising is None or self._supervising.done():
            self._ready = asyncio.get_running_loop().create_future()
            self._supervising = asyncio.create_task(self._supervise(), name="local-model")

    async def wait_ready(self) -> Ready:
        """Start the runner if needed and wait until its model is loaded."""
        self.start()
        assert self._ready is not None
        try:
            async with asyncio.timeout(self._settings.start_timeout):
                return await asyncio.shield(self._ready)
        except TimeoutError:
            raise RunnerFailure(NOT_STARTED) from None

    async def generate(
        self,
        turns: Sequence[tuple[str, str]],
        *,
        max_tokens: int,
        temperature: float | None = None,
        json_schema: Mapping[str, Any] | None = None,
    ) -> AsyncGenerator[Delta | Done, None]:
        """Run one request on the runner, after the calls before it; yields its `Delta`s and
        one `Done`. Raises `RunnerFailure` for a request the model refused or a runner that
        stopped. Closing the iterator early cancels the request."""
        await self._turn.acquire()
        call: _Call | None = None
        try:
            ready = await self.wait_ready()
            del ready
            call = _Call(next(self._ids))
            self._active = call
            self._send(
                Generate(
                    id=call.id,
                    turns=[Turn(role, content) for role, content in turns],
                    max_tokens=max_tokens,
                    temperature=temperature,
                    json_schema=dict(json_schema) if json_schema is not None else None,
                )
            )
            progress = RunnerProgress(self.pid, self._settings.stall_timeout)
            while True:
                try:
                    async with asyncio.timeout(self._settings.stall_timeout):
                        event = await call.events.get()
                except TimeoutError:
                    if progress.still_working():
                        continue
                    log.error("local_model.stalled", seconds=self._settings.stall_timeout)
                    self._kill()
                    raise RunnerFailure(STOPPED) from None
                progress.reset()
                if event is None:
                    raise RunnerFailure(STOPPED)
                if isinstance(event, Failed):
                    call.ended = True
                    raise RunnerFailure(event.message)
                if isinstance(event, Done):
                    call.ended = True
                    yield event
                    return
                if isinstance(event, Delta):
                    yield event
        finally:
            self._end_turn(call)

    def _end_turn(self, call: _Call | None) -> None:
        if call is None or call.ended or self._active is not call:
            self._active = None if self._active is call else self._active
            self._turn.release()
            return
        # Stopped early: the runner finishes the request at its next token; the next call
        # waits for that, so that it never reads this one's last tokens.
        with contextlib.suppress(RunnerFailure):
            self._send(Cancel(call.id))
        asyncio.get_running_loop().create_task(self._drain(call))

    async def _drain(self, call: _Call) -> None:
        try:
            progress = RunnerProgress(self.pid, self._settings.stall_timeout)
            try:
                while True:
                    try:
                        async with asyncio.timeout(self._settings.stall_timeout):
                            await self._until_ended(call)
                        break
                    except TimeoutError:
                        if not progress.still_working():
                            raise
            except TimeoutError:
                log.error("local_model.stalled_on_cancel")
                self._kill()
                # Its death is seen (and the next runner awaited) before the turn passes on.
                async with asyncio.timeout(self._settings.stop_timeout * 2):
                    await self._until_ended(call)
        except TimeoutError:
            log.error("local_model.unreaped")
        finally:
            if self._active is call:
                self._active = None
            self._turn.release()

    @staticmethod
    async def _until_ended(call: _Call) -> None:
        while True:
            event = await call.events.get()
            if event is None or isinstance(event, Done | Failed):
                return

    def _send(self, message: Generate | Cancel) -> None:
        process = self._process
        if process is None or process.stdin is None or process.returncode is not None:
            raise RunnerFailure(STOPPED)
        try:
            process.stdin.write(frame(message))
        except (BrokenPipeError, ConnectionResetError, RuntimeError):
            raise RunnerFailure(STOPPED) from None

    def _kill(self) -> None:
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()

    async def _supervise(self) -> None:
        backoff = Backoff()
        loop = asyncio.get_running_loop()
        while not self._closing:
            started_at = loop.time()
            try:
                await self._run_once()
            except Exception:
                log.exception("local_model.supervisor_failed")
                self._gone()
            if self._closing:
                break
            if loop.time() - started_at > 60:
                backoff.reset()
            delay = backoff.next()
            log.info("local_model.restarting", in_seconds=delay)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._closed.wait()
        self._gone()

    def _gone(self) -> None:
        """The runner is gone: the call in progress learns it at once, and later calls wait
        for the next runner (or fail, once closing)."""
        call, self._active = self._active, None
        if call is not None:
            call.events.put_nowait(None)
        ready = self._ready
        if ready is None:
            return
        if self._closing:
            if not ready.done():
                ready.set_exception(RunnerFailure(NOT_STARTED))
                ready.exception()  # retrieved: a start nobody waited for is only logged
        elif ready.done():
            self._ready = loop_future()

    async def _run_once(self) -> None:
        settings = self._settings
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "adapters.local_model.runner",
            "--threads",
            str(settings.threads),
            "--n-ctx",
            str(settings.n_ctx),
            "--memory-limit",
            str(settings.memory_limit),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
            # Its own process group: a terminal's Ctrl-C goes to the server, which stops it.
            start_new_session=True,
        )
        self._process = process
        self.starts += 1
        assert process.stdout is not None
        ready = self._ready
        try:
            await self._read(process.stdout)
        finally:
            if ready is not None and not ready.done():
                # It died before it was ready: those waiting for it hear so.
                ready.set_exception(RunnerFailure(NOT_STARTED))
                ready.exception()  # retrieved: a start nobody waited for is only logged
            self._gone()
            returncode = await process.wait()
            event = "local_model.stopped" if self._closing else "local_model.exited"
            (log.info if self._closing else log.error)(
                event, pid=process.pid, exit=describe_exit(returncode)
            )

    async def _read(self, stdout: asyncio.StreamReader) -> None:
        while True:
            try:
                header = await stdout.readexactly(HEADER.size)
                (size,) = HEADER.unpack(header)
                if size > MAX_FRAME:
                    raise ValueError("frame too large")
                message = from_runner.decode(await stdout.readexactly(size))
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            except ValueError:
                log.error("local_model.unreadable_frame")
                self._kill()
                return
            if isinstance(message, Ready):
                log.info("local_model.ready", pid=message.pid, n_ctx=message.n_ctx)
                if self._ready is not None and not self._ready.done():
                    self._ready.set_result(message)
                continue
            call = self._active
            if call is not None and call.id == message.id:
                call.events.put_nowait(message)

    async def aclose(self) -> None:
        """Stop the runner: close its input (it exits at once), kill it if it lingers; the
        call in progress and those waiting fail with `STOPPED`."""
        self._closing = True
        self._closed.set()
        process = self._process
        if process is not None and process.returncode is None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                async with asyncio.timeout(self._settings.stop_timeout):
                    await process.wait()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
        if self._supervising is not None:
            try:
                async with asyncio.timeout(self._settings.stop_timeout):
                    await self._supervising
            except TimeoutError:
                self._supervising.cancel()
        self._gone()


def loop_future() -> asyncio.Future[Ready]:
    return asyncio.get_running_loop().create_future()
