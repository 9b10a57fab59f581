"""Process-owned background tasks: cancel once, however many times it is asked."""

from __future__ import annotations

import asyncio

from adapters.background import SHUTTING_DOWN, AsyncioBackgroundTasks


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


async def test_a_drain_lets_answers_end_within_the_grace_and_cuts_the_others():
    tasks = AsyncioBackgroundTasks()
    endings: dict[str, str] = {}

    def answer(key: str, seconds: float):
        async def run() -> None:
            try:
                await asyncio.sleep(seconds)
                endings[key] = "completed"
            except asyncio.CancelledError as cut:
                endings[key] = str(cut.args[0])

        return run

    tasks.spawn("answer", answer("short", 0.05), key="short")
    tasks.spawn("answer", answer("long", 30), key="long")
    loop = asyncio.get_running_loop()
    started = loop.time()
    await tasks.drain(0.5)
    assert 0.4 < loop.time() - started < 2
    assert endings == {"short": "completed", "long": SHUTTING_DOWN}


async def test_a_drain_hurried_by_a_second_signal_cuts_at_once():
    tasks = AsyncioBackgroundTasks()
    hurry = asyncio.Event()
    tasks.spawn("answer", lambda: asyncio.sleep(30), key="long")
    loop = asyncio.get_running_loop()
    loop.call_later(0.1, hurry.set)
    started = loop.time()
    await tasks.drain(30, hurry)
    assert loop.time() - started < 2
    assert tasks.running == 0
