"""`BackgroundTasks` on the process's event loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from application.ports.background_tasks import CANCEL_REQUESTED

log = logging.getLogger(__name__)
SHUTTING_DOWN = "shutdown"
# What a cut answer may take to store its ending and settle its usage.
RECORD_SECONDS = 2.0


class AsyncioBackgroundTasks:
    """Tasks owned by the process, not by a request. A strong reference is kept until each
    ends (the event loop itself only keeps weak ones)."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def spawn(self, name: str, work: Callable[[], Awaitable[None]], *, key: str) -> None:
        async def run() -> None:
            await work()

        task = asyncio.get_running_loop().create_task(run(), name=f"{name}:{key}")
        self._tasks[key] = task
        task.add_done_callback(lambda done: self._done(key, done))

    def _done(self, key: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed", task.get_name(), exc_info=task.exception())

    def cancel(self, key: str) -> bool:
        task = self._tasks.get(key)
        if task is None or task.done():
            return False
        # Once only: a cancel arrives both from the request and from the NOTIFY listener, and
        # a second one would interrupt the task while it records the first.
        if not task.cancelling():
            task.cancel(CANCEL_REQUESTED)
        return True

    async def wait(self, key: str, seconds: float) -> bool:
        task = self._tasks.get(key)
        if task is None:
            return True
        done, _ = await asyncio.wait({task}, timeout=seconds)
        return bool(done)

    @property
    def running(self) -> int:
        return len(self._tasks)

    async def drain(self, grace: float, hurry: asyncio.Event | None = None) -> None:
        """Let the running tasks go on for at most `grace` seconds (until `hurry` is set, if
        sooner), then cut the ones left (`shutdown`)."""
        tasks = list(self._tasks.values())
        if tasks and grace > 0:
            waiting: list[asyncio.Future[Any]] = [asyncio.ensure_future(asyncio.wait(tasks))]
            if hurry is not None:
                waiting.append(asyncio.ensure_future(hurry.wait()))
            _, pending = await asyncio.wait(
                waiting, timeout=grace, return_when=asyncio.FIRST_COMPLETED
            )
            for waiter in pending:
                waiter.cancel()
        await self.shutdown()

    async def shutdown(self, grace: float = RECORD_SECONDS) -> None:
        """Cancel what is still running and give each task `grace` seconds to record it."""
        tasks = list(self._tasks.values())
        for task in tasks:
            # A task cancelled already (by a cancel request, or by a drain before the app's
            # own shutdown) is recording that; a second cancel would interrupt it.
            if not task.cancelling():
                task.cancel(SHUTTING_DOWN)
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
