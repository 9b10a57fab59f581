"""Large files embedded in parts by several workers, on real Postgres through HTTP."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta

from litestar.testing import AsyncTestClient
from sqlalchemy import text

from adapters.queue.pgqueuer_worker import RetryPolicy
from entrypoints.http.app import create_app
from entrypoints.worker.jobs import build_worker
from tests.http.helpers import make_kb
from tests.http.processing_support import EmbedderOverride, settle, upload
from tests.http.test_worker_fault import BIN

SECTIONS = 9
LONG = "".join(
    f"# Section {n}\n\nPolicy {n} says that every team keeps its own records for {n} years.\n\n"
    for n in range(SECTIONS)
)


@asynccontextmanager
async def workers(
    settings, database, registry, count: int, concurrency: int = 2, **kwargs
) -> AsyncIterator[None]:
    async with AsyncExitStack() as stack:
        for _ in range(count):
            job_worker, container = build_worker(
                settings,
                database,
                EmbedderOverride(registry),
                concurrency=concurrency,
                retry=RetryPolicy(max_attempts=3, initial_delay=timedelta(0)),
                **kwargs,
            )
            task = asyncio.create_task(job_worker.run())

            async def stop(job_worker=job_worker, task=task, container=container) -> None:
                job_worker.stop()
                await asyncio.wait_for(task, 30)
                await container.close()

            stack.push_async_callback(stop)
        yield


@asynccontextmanager
async def large_file(settings, database, registry, who, part_size: int = 2):
    """Settings that split files into parts of `part_size` passages, a client of an app with
    them, and the long file uploaded to a fresh knowledge base."""
    split = dataclasses.replace(settings, embedding_part_size=part_size)
    async with AsyncTestClient(app=create_app(split, database, EmbedderOverride(registry))) as c:
        kb = await make_kb(c, who, chunkSize=32, chunkOverlap=0)
        record = await upload(c, who, kb["id"], "long.md", "text/markdown", LONG.encode())
        yield split, c, kb, record


async def rows(owner_engine, sql: str, **params) -> list:
    async with owner_engine.connect() as connection:
        return list((await connection.execute(text(sql), params)).all())


async def passages(owner_engine, record_id: int) -> list[tuple]:
    return await rows(
        owner_engine,
        "SELECT chunk_index, text, vector_dims(embedding) FROM chunks "
        "WHERE file_record_id = :id ORDER BY chunk_index",
        id=record_id,
    )


async def test_a_large_file_is_embedded_in_parts_by_two_workers_and_published_whole(
    settings, database, clean, alice, owner_engine, registry
):
    async with large_file(settings, database, registry, alice) as (split, c, kb, record):
        whole_kb = await make_kb(c, alice, name="Whole", chunkSize=32, chunkOverlap=0)
        async with workers(split, database, registry, count=2):
            (done,) = await settle(c, alice, kb["id"])
        assert done["processingStatus"] == "completed", done
        # The same file, embedded by one job, for comparison.
        whole = await upload(c, alice, whole_kb["id"], "long.md", "text/markdown", LONG.encode())
        async with workers(settings, database, registry, count=1):
            await settle(c, alice, whole_kb["id"])
        found = await c.post(
            "/kb/search",
            json={"kbId": kb["id"], "query": "policy 7 records"},
            headers=alice.headers,
        )
        assert found.status_code == 200 and "Policy 7" in found.json()["results"][0]["text"]
    in_parts = await passages(owner_engine, record["id"])
    assert len(in_parts) >= SECTIONS
    assert [(i, t, d) for i, t, d in in_parts] == await passages(owner_engine, whole["id"])
    assert [i for i, *_ in in_parts] == list(range(len(in_parts)))
    log = await rows(
        owner_engine,
        "SELECT entrypoint, count(*) FROM pgqueuer_log WHERE status = 'successful' "
        "GROUP BY entrypoint",
    )
    assert dict(log)["file.embed"] >= (len(in_parts) + 1) // 2
    assert await rows(owner_engine, "SELECT 1 FROM embedding_parts") == []
    assert await rows(owner_engine, "SELECT 1 FROM staged_chunks") == []


async def test_the_parts_of_a_file_under_way_go_before_files_not_yet_started(
    settings, database, clean, alice, owner_engine, registry
):
    async with large_file(settings, database, registry, alice) as (split, c, kb, large):
        for n in range(3):
            await upload(c, alice, kb["id"], f"small-{n}.md", "text/markdown", b"# A\n\nb\n")
        async with workers(split, database, registry, count=1, concurrency=1):
            await settle(c, alice, kb["id"], count=4)
    finished = await rows(
        owner_engine,
        "SELECT id FROM knowledge_base_files WHERE processing_status = 'completed' "
        "ORDER BY updated_at",
    )
    # One job at a time (and one taken ahead by the queue): the large file's parts ran right
    # after it was split, before the small files queued behind it; first in, last out if not.
    order = [row[0] for row in finished]
    assert order.index(large["id"]) <= 1, order


async def test_reprocessing_a_file_in_parts_leaves_one_set(
    settings, database, clean, alice, owner_engine, registry
):
    async with (
        large_file(settings, database, registry, alice, 3) as (split, c, kb, record),
        workers(split, database, registry, count=1),
    ):
        await settle(c, alice, kb["id"])
        before = await passages(owner_engine, record["id"])
        again = await c.post(
            "/kb/files/reprocess",
            json={"kbId": kb["id"], "fileId": record["fileId"]},
            headers=alice.headers,
        )
        assert again.status_code == 202
        await asyncio.sleep(0.3)
        (done,) = await settle(c, alice, kb["id"])
    assert done["processingStatus"] == "completed"
    assert await passages(owner_engine, record["id"]) == before and len(before) > 3


async def test_a_part_that_cannot_be_embedded_fails_the_file_with_nothing_half_written(
    settings, database, clean, alice, owner_engine, registry
):
    async with large_file(settings, database, registry, alice) as (split, c, kb, record):
        # Every attempt fails: the parts are retried, and the last attempt fails the file.
        registry.embedder.failure = ConnectionError("provider unreachable")
        async with workers(split, database, registry, count=1):
            (done,) = await settle(c, alice, kb["id"])
    assert done["processingStatus"] == "chunk_failed"
    assert "after several attempts" in done["processingError"]
    assert await passages(owner_engine, record["id"]) == []
    assert await rows(owner_engine, "SELECT 1 FROM embedding_parts") == []
    assert await rows(owner_engine, "SELECT 1 FROM staged_chunks") == []


async def test_the_reaper_counts_part_jobs_as_live(
    settings, database, clean, alice, owner_engine, app_pool, registry
):
    async with large_file(settings, database, registry, alice) as (_, _, _, record):
        pass
    async with owner_engine.begin() as connection:
        # As if `file.process` had staged the parts and queued their jobs, then ended.
        await connection.execute(text("DELETE FROM pgqueuer"))
        await connection.execute(
            text(
                "INSERT INTO pgqueuer (priority, entrypoint, payload, status, dedupe_key) "
                "VALUES (0, 'file.embed', '{}', 'queued', :key)"
            ),
            {"key": f"file.embed:{record['id']}:1"},
        )
        await connection.execute(
            text(
                "UPDATE knowledge_base_files SET processing_status = 'chunking', "
                "updated_at = now() - interval '1 hour'"
            )
        )

    async def reap() -> list:
        async with app_pool.acquire() as connection:
            return await connection.fetch(
                "SELECT * FROM ap_reap_stalled_files($1)", timedelta(minutes=2)
            )

    assert await reap() == []
    async with owner_engine.begin() as connection:
        await connection.execute(text("DELETE FROM pgqueuer"))
    assert [(r["file_record_id"], r["processing_status"]) for r in await reap()] == [
        (record["id"], "chunk_failed")
    ]


async def test_a_worker_killed_in_the_middle_of_a_part_loses_nothing(
    settings, database, clean, alice, owner_engine, registry
):
    async with large_file(settings, database, registry, alice) as (split, c, kb, record):
        env = {
            **os.environ,
            "AP_DATABASE_URL": database.url,
            "AP_DATA_DIR": str(settings.data_dir),
            "AP_WORKER_CONCURRENCY": "1",
            "AP_EMBEDDING_PART_SIZE": "2",
        }
        # The real worker stages the parts, then loads the bundled model in its first part
        # job: seconds in which it holds that part, when it is killed.
        doomed = await asyncio.create_subprocess_exec(
            BIN, "worker", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 60
            while not await rows(owner_engine, "SELECT 1 FROM embedding_parts WHERE starts > 0"):
                assert time.monotonic() < deadline and doomed.returncode is None
                await asyncio.sleep(0.05)
        finally:
            doomed.send_signal(signal.SIGKILL)
            await asyncio.wait_for(doomed.wait(), 10)
        assert await rows(owner_engine, "SELECT 1 FROM embedding_parts WHERE done") == []
        async with workers(
            split, database, registry, count=1, heartbeat_timeout=timedelta(seconds=2)
        ):
            (done,) = await settle(c, alice, kb["id"], within=60)
    assert done["processingStatus"] == "completed", done
    stored = await passages(owner_engine, record["id"])
    assert [i for i, *_ in stored] == list(range(len(stored))) and len(stored) >= SECTIONS
    assert await rows(owner_engine, "SELECT 1 FROM embedding_parts") == []
