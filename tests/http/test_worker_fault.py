"""A worker process killed in the middle of a job: another worker finishes the file, once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from litestar.testing import AsyncTestClient
from sqlalchemy import text

from adapters.queue.worker import RetryPolicy
from entrypoints.http.app import create_app
from entrypoints.worker import build_worker
from tests.http.helpers import make_kb
from tests.http.test_processing import HANDBOOK, EmbedderOverride, settle, upload

BIN = Path(sys.executable).parent / "agent-platform"


async def status_of(owner_engine, record_id: int) -> tuple[str, int]:
    async with owner_engine.connect() as connection:
        row = (
            await connection.execute(
                text(
                    "SELECT processing_status, processing_attempts FROM knowledge_base_files "
                    "WHERE id = :id"
                ),
                {"id": record_id},
            )
        ).one()
    return row[0], row[1]


async def test_a_killed_worker_loses_nothing(
    settings, database, clean, alice, owner_engine, registry
):
    async with AsyncTestClient(
        app=create_app(settings, database, EmbedderOverride(registry))
    ) as client:
        kb = await make_kb(client, alice)
        record = await upload(client, alice, kb["id"], "a.md", "text/markdown", HANDBOOK.encode())
        env = {
            **os.environ,
            "AP_DATABASE_URL": database.url,
            "AP_DATA_DIR": str(settings.data_dir),
            "AP_WORKER_CONCURRENCY": "1",
        }
        # The real worker loads the bundled embedding model on its first passage: seconds in
        # which it holds the job, in `chunking`, when it is killed.
        doomed = await asyncio.create_subprocess_exec(
            BIN, "worker", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 60
            while (await status_of(owner_engine, record["id"]))[0] != "chunking":
                assert time.monotonic() < deadline and doomed.returncode is None
                await asyncio.sleep(0.05)
        finally:
            doomed.send_signal(signal.SIGKILL)
            await asyncio.wait_for(doomed.wait(), 10)
        assert await status_of(owner_engine, record["id"]) == ("chunking", 1)

        rescuer, container = build_worker(
            settings,
            database,
            EmbedderOverride(registry),
            concurrency=1,
            retry=RetryPolicy(max_attempts=3, initial_delay=timedelta(0)),
            heartbeat_timeout=timedelta(seconds=2),
        )
        running = asyncio.create_task(rescuer.run())
        try:
            (done,) = await settle(client, alice, kb["id"], within=60)
        finally:
            rescuer.stop()
            await asyncio.wait_for(running, 30)
            await container.close()
    assert done["processingStatus"] == "completed"
    assert (await status_of(owner_engine, record["id"]))[1] == 2
    async with owner_engine.connect() as connection:
        indexes = (
            await connection.scalars(text("SELECT chunk_index FROM chunks ORDER BY chunk_index"))
        ).all()
    assert indexes == list(range(len(indexes))) and indexes
