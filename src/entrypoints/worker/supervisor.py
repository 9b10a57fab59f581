"""`serve`'s job worker as a supervised child process.

On the embedded default, `serve` runs the job worker (`agent-platform worker`) as a child
process, so that extraction, embedding and local models never share a process with request
handling. The supervisor starts it, logs how it ended when it dies (exit code or signal),
hands the jobs it held to the next worker at once (they count as cut short), and starts a new
one after a pause that grows while the children keep dying quickly. A child whose resident
memory passes twice the worker ceiling is killed (its jobs go back to the queue), so one
runaway job cannot take the machine; one that ends itself with `RECYCLE_EXIT` (its memory
stayed high with no job in hand) is replaced at once. `stop` sends SIGTERM (the child
finishes the jobs in hand) and kills it after `stop_timeout`; `hurry` (a second stop signal)
signals it again, and kills it `HURRIED_SECONDS` later. The child watches its standard input: if
this process dies, the pipe closes and the child stops too.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence

import structlog

from adapters.child_processes import Backoff, describe_exit, resident_bytes

log = structlog.get_logger("agent_platform.supervisor")

MEMORY_POLL_SECONDS = 0.5
RECYCLE_EXIT = 75
"""A worker child's exit code when it ends itself to be replaced (its memory stayed high)."""
HEALTHY_AFTER_SECONDS = 60.0
# A hurried child cuts its answers at once; recording them takes a moment.
HURRIED_SECONDS = 3.0

ReleaseJobs = Callable[[uuid.UUID], Awaitable[int]]
WORKER_COMMAND = (sys.executable, "-m", "entrypoints.cli", "worker")


class WorkerSupervisor:
    """Keeps one `agent-platform worker` child running until `stop`."""

    def __init__(
        self,
        env: Mapping[str, str],
        release_jobs: ReleaseJobs,
        *,
        memory_limit: int = 0,
        stop_timeout: float = 30.0,
        backoff: Backoff | None = None,
        command: Sequence[str] = WORKER_COMMAND,
    ) -> None:
        self._command = list(command)
        self._env = dict(env)
        self._release_jobs = release_jobs
        self._memory_limit = memory_limit
        self._stop_timeout = stop_timeout
        self._backoff = backoff or Backoff(initial=1.0)
        self._process: asyncio.subprocess.Process | None = None
        self._stopping = asyncio.Event()
        self._hurried = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.started = 0

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.returncode is None else None

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name="worker-supervisor")

    async def _supervise(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping.is_set():
            worker_id = uuid.uuid4()
            started_at = loop.time()
            try:
                returncode = await self._run_child(worker_id)
            except Exception:
                log.exception("worker.child_failed_to_start")
                returncode = None
            if self._stopping.is_set():
                break
            if loop.time() - started_at > HEALTHY_AFTER_SECONDS:
                self._backoff.reset()
            if returncode == RECYCLE_EXIT:
                # It held no job; a worker that swells again at once still waits its turn.
                log.info("worker.child_recycled", worker_id=str(worker_id))
            else:
                log.error(
                    "worker.child_exited",
                    worker_id=str(worker_id),
                    exit=describe_exit(returncode),
                )
                try:
                    released = await self._release_jobs(worker_id)
                except Exception:
                    log.exception("worker.release_failed", worker_id=str(worker_id))
                else:
                    if released:
                        log.warning(
                            "worker.jobs_released", worker_id=str(worker_id), count=released
                        )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._backoff.next()):
                    await self._stopping.wait()

    async def _run_child(self, worker_id: uuid.UUID) -> int:
        env = {**self._env, "AP_WORKER_ID": str(worker_id), "AP_WORKER_SUPERVISED": "1"}
        process = await asyncio.create_subprocess_exec(
            *self._command,
            stdin=asyncio.subprocess.PIPE,
            env=env,
            # Its own process group: Ctrl-C in a terminal reaches the server, which stops it.
            start_new_session=True,
        )
        self._process = process
        self.started += 1
        log.info("worker.child_started", pid=process.pid, worker_id=str(worker_id))
        watching = asyncio.create_task(self._watch_memory(process))
        exited = asyncio.create_task(process.wait())
        stopping = asyncio.create_task(self._stopping.wait())
        try:
            await asyncio.wait({exited, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not exited.done():
                await self._terminate(process)
            return await exited
        finally:
            watching.cancel()
            stopping.cancel()

    async def _terminate(self, process: asyncio.subprocess.Process) -> None:
        """SIGTERM (it finishes the jobs in hand), SIGKILL after `stop_timeout`."""
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._stop_timeout) as limit:
                exited = asyncio.ensure_future(process.wait())
                hurried = asyncio.ensure_future(self._hurried.wait())
                await asyncio.wait({exited, hurried}, return_when=asyncio.FIRST_COMPLETED)
                hurried.cancel()
                if not exited.done():
                    deadline = limit.when()
                    hurry_deadline = loop.time() + HURRIED_SECONDS
                    limit.reschedule(min(deadline, hurry_deadline) if deadline else hurry_deadline)
                    await exited
        except TimeoutError:
            log.error("worker.child_killed_at_stop", pid=process.pid)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        log.info("worker.child_stopped", pid=process.pid, exit=describe_exit(process.returncode))

    async def _watch_memory(self, process: asyncio.subprocess.Process) -> None:
        if self._memory_limit <= 0:
            return
        hard_limit = 2 * self._memory_limit
        while process.returncode is None:
            resident = resident_bytes(process.pid)
            if resident is not None and resident > hard_limit:
                log.error(
                    "worker.memory_exceeded",
                    pid=process.pid,
                    resident_mb=resident // 2**20,
                    limit_mb=hard_limit // 2**20,
                )
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                return
            await asyncio.sleep(MEMORY_POLL_SECONDS)

    def hurry(self) -> None:
        """Signal the stopping child again (it skips what is left of its grace); it is killed
        `HURRIED_SECONDS` later."""
        self._hurried.set()
        process = self._process
        if self._stopping.is_set() and process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)

    async def stop(self) -> None:
        """SIGTERM the child (it finishes its jobs in hand), SIGKILL it after the timeout; no
        child is started after this."""
        self._stopping.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
