"""`serve`'s worker supervisor, on a stand-in child process: restarts with its jobs released,
recycling, a clean stop, and no child started once stopping."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid

import psutil

from adapters.child_processes import Backoff
from entrypoints.worker.supervisor import RECYCLE_EXIT, WorkerSupervisor

SLEEPER = (sys.executable, "-c", "import time; time.sleep(120)")


class Released:
    def __init__(self) -> None:
        self.ids: list[uuid.UUID] = []

    async def __call__(self, worker_id: uuid.UUID) -> int:
        self.ids.append(worker_id)
        return 1


async def wait_for(predicate, within: float = 20.0) -> None:
    async with asyncio.timeout(within):
        while not predicate():  # noqa: ASYNC110 - polling another process
            await asyncio.sleep(0.05)


async def test_a_child_that_dies_is_replaced_and_its_jobs_released():
    released = Released()
    supervisor = WorkerSupervisor(
        os.environ, released, backoff=Backoff(initial=0.05), command=SLEEPER
    )
    supervisor.start()
    try:
        await wait_for(lambda: supervisor.pid is not None)
        first = supervisor.pid
        os.kill(first, signal.SIGKILL)
        await wait_for(lambda: supervisor.pid not in (None, first))
        assert len(released.ids) == 1
        assert supervisor.started == 2
    finally:
        await supervisor.stop()
    assert not psutil.pid_exists(first)


async def test_a_recycled_child_is_replaced_without_releasing_jobs():
    released = Released()
    command = (sys.executable, "-c", f"import sys; sys.exit({RECYCLE_EXIT})")
    supervisor = WorkerSupervisor(
        os.environ, released, backoff=Backoff(initial=0.05), command=command
    )
    supervisor.start()
    try:
        await wait_for(lambda: supervisor.started >= 3)
    finally:
        await supervisor.stop()
    assert released.ids == []


async def test_stop_terminates_the_child_and_starts_no_other():
    supervisor = WorkerSupervisor(
        os.environ, Released(), backoff=Backoff(initial=0.01), command=SLEEPER, stop_timeout=5
    )
    supervisor.start()
    await wait_for(lambda: supervisor.pid is not None)
    child = supervisor.pid
    await supervisor.stop()
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == "zombie"
    assert supervisor.pid is None
    started = supervisor.started
    await asyncio.sleep(0.2)
    assert supervisor.started == started


async def test_stop_while_a_child_is_being_started_leaves_no_child():
    supervisor = WorkerSupervisor(
        os.environ, Released(), backoff=Backoff(initial=0.01), command=SLEEPER, stop_timeout=5
    )
    supervisor.start()
    # Straight away: the first child may still be on its way.
    await asyncio.sleep(0)
    await supervisor.stop()
    assert supervisor.pid is None
