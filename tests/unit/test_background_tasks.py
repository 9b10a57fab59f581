"""Process-owned background tasks: cancel once, however many times it is asked."""

from __future__ import annotations

import asyncio

from adapters.background import AsyncioBackgroundTasks


async def test_a_second_cancel_does_not_interrupt_the_task_recording_the_first():
    tasks = AsyncioBackgroundTasks()
    recorded: list[str] = []
    started = asyncio.Event()

    async def answer() -> None:
        try:
            started.set()
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)  # storing how the answer ended
            recorded.append("cancelled")

    tasks.spawn("answer", answer, key="run-1")
    await started.wait()
    assert tasks.cancel("run-1")
    await asyncio.sleep(0.01)
    # The same cancel again, as the NOTIFY listener delivers it moments later.
    assert tasks.cancel("run-1")
    assert await tasks.wait("run-1", 2)
    assert recorded == ["cancelled"]
    assert not tasks.cancel("run-1")
