"""A job worker consuming the queue in the background, for the tests that run one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from adapters.queue.pgqueuer_worker import PgQueuerWorker


@asynccontextmanager
async def running(worker: PgQueuerWorker) -> AsyncIterator[None]:
    """Run `worker` until the block ends, then stop it and wait for its jobs to end."""
    task = asyncio.create_task(worker.run())
    try:
        yield
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)
