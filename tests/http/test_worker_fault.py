"""A worker process killed in the middle of a job: another worker finishes the file, once; a
file whose runs keep being cut short fails."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

from dishka import Provider, Scope, provide
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from adapters.extraction.sandbox import SandboxedTextExtractor
from adapters.queue.pgqueuer_worker import RetryPolicy
from application.ports.text_extractor import TextExtractor
from application.use_cases.process_file import TOO_MANY_RUNS
from entrypoints.http.app import create_app
from entrypoints.worker.jobs import build_worker
from tests.http.helpers import make_kb
from tests.http.processing_support import HANDBOOK, EmbedderOverride, settle, upload

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


async def test_a_file_whose_runs_keep_being_cut_short_still_fails_by_its_own_cap(
    settings, database, clean, alice, owner_engine, registry
):
    """The queue's cap on cut-short runs stays above the file's own: the file ends in its
    failure state with its message, rather than the job being dropped."""
    async with AsyncTestClient(
        app=create_app(settings, database, EmbedderOverride(registry))
    ) as client:
        kb = await make_kb(client, alice)
        record = await upload(client, alice, kb["id"], "a.md", "text/markdown", HANDBOOK.encode())
        async with owner_engine.begin() as connection:
            await connection.execute(
                text("UPDATE knowledge_base_files SET processing_attempts = 5 WHERE id = :id"),
                {"id": record["id"]},
            )
            await connection.execute(
                text("INSERT INTO pgqueuer_job_runs (job_id, started) SELECT id, 5 FROM pgqueuer")
            )
        worker, container = build_worker(settings, database, EmbedderOverride(registry))
        running = asyncio.create_task(worker.run())
        try:
            (done,) = await settle(client, alice, kb["id"], within=20)
        finally:
            worker.stop()
            await asyncio.wait_for(running, 30)
            await container.close()
    assert (done["processingStatus"], done["processingError"]) == ("parse_failed", TOO_MANY_RUNS)


class FaultyExtractorOverride(Provider):
    """The worker's extractor, sandboxed as in production, running `FaultyExtractor`."""

    scope = Scope.APP

    @provide
    def extractor(self) -> Iterator[TextExtractor]:
        sandbox = SandboxedTextExtractor(
            memory_limit=512 * 2**20, timeout=20, target="tests.fakes.extractors:FaultyExtractor"
        )
        yield sandbox
        sandbox.close()


async def test_an_extractor_that_aborts_costs_that_file_only(
    settings, database, clean, alice, registry
):
    async with AsyncTestClient(
        app=create_app(settings, database, EmbedderOverride(registry))
    ) as client:
        kb = await make_kb(client, alice)
        doomed = await upload(client, alice, kb["id"], "abort.md", "text/markdown", b"# A\n\nx\n")
        swollen = await upload(client, alice, kb["id"], "hog.md", "text/markdown", b"# H\n\nx\n")
        worker, container = build_worker(
            settings,
            database,
            EmbedderOverride(registry),
            FaultyExtractorOverride(),
            concurrency=2,
            retry=RetryPolicy(max_attempts=3, initial_delay=timedelta(seconds=0.2)),
        )
        running = asyncio.create_task(worker.run())
        try:
            files = await settle(client, alice, kb["id"], count=2, within=90)
            # The worker lived through both: the API answered, and a good file still goes through.
            assert (await client.get("/health")).status_code == 200
            healthy = await upload(
                client, alice, kb["id"], "fine.md", "text/markdown", HANDBOOK.encode()
            )
            files = await settle(client, alice, kb["id"], count=3, within=60)
        finally:
            worker.stop()
            await asyncio.wait_for(running, 30)
            await container.close()
    by_id = {f["id"]: f for f in files}
    assert by_id[doomed["id"]]["processingStatus"] == "parse_failed"
    assert "crashed on this file (signal SIGABRT)" in by_id[doomed["id"]]["processingError"]
    assert "every attempt" in by_id[doomed["id"]]["processingError"]
    assert by_id[swollen["id"]]["processingStatus"] == "parse_failed"
    assert "needs more memory than allowed" in by_id[swollen["id"]]["processingError"]
    assert by_id[healthy["id"]]["processingStatus"] == "completed"
