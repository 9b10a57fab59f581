from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from litestar.testing import AsyncTestClient

from adapters.queue.pgqueuer_worker import RetryPolicy
from entrypoints.worker.jobs import build_worker
from tests.queue_support import running


async def make_kb(client: AsyncTestClient, who: Any, **body: Any) -> dict[str, Any]:
    response = await client.post("/kb/manage", json={"name": "Docs", **body}, headers=who.headers)
    assert response.status_code == 201, response.text
    return response.json()["knowledgeBase"]


async def presign(
    client: AsyncTestClient,
    who: Any,
    name: str = "notes.md",
    content_type: str = "text/markdown",
    size: int | None = 5,
) -> dict[str, Any]:
    body: dict[str, Any] = {"fileName": name, "contentType": content_type}
    if size is not None:
        body["fileSize"] = size
    response = await client.post("/upload/presigned", json=body, headers=who.headers)
    assert response.status_code == 200, response.text
    return response.json()


def association(kb_id: Any, upload: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    body = {
        "kbId": kb_id,
        "fileId": upload["fileId"],
        "fileName": "notes.md",
        "fileKey": upload["fileKey"],
        "contentKey": upload["contentKey"],
        "contentType": "text/markdown",
        "fileSize": 5,
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not ...}


async def put_upload(client: AsyncTestClient, upload: dict[str, Any], data: bytes) -> Any:
    """PUT `data` to a local-disk signed upload address, with the headers it asks for."""
    parts = urlsplit(upload["uploadUrl"])
    return await client.put(f"{parts.path}?{parts.query}", content=data, headers=upload["headers"])


async def add_file(client: AsyncTestClient, who: Any, kb_id: int) -> dict[str, Any]:
    upload = await presign(client, who)
    uploaded = await put_upload(client, upload, b"hello")
    assert uploaded.status_code == 200, uploaded.text
    response = await client.post("/kb/files", json=association(kb_id, upload), headers=who.headers)
    assert response.status_code == 201, response.text
    return response.json()["file"]


@asynccontextmanager
async def running_worker(
    settings: Any, database: Any, *providers: Any, concurrency: int = 2, attempts: int = 3
) -> AsyncIterator[None]:
    """A job worker (`build_worker` with `providers`) consuming the queue in the background
    until the block ends; failed jobs are retried at once, `attempts` times in all."""
    job_worker, container = build_worker(
        settings,
        database,
        *providers,
        concurrency=concurrency,
        retry=RetryPolicy(max_attempts=attempts, initial_delay=timedelta(0)),
    )
    try:
        async with running(job_worker):
            yield
    finally:
        await container.close()
