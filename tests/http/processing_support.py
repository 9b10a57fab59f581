"""What the tests of file processing share: the handbook they upload, an embedder registry
swapped into the app, and helpers to upload a file over HTTP and wait for files to finish. The
worker itself is the `worker` fixture of `conftest`."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

from dishka import Provider, Scope, provide

from application.ports.embedder import EmbedderRegistry
from tests.fakes import FakeEmbedderRegistry
from tests.http.helpers import association

HANDBOOK = (
    "# Holidays\n\nEveryone gets thirty days of paid holiday every year.\n\n"
    "# Expenses\n\nKeep every receipt and file expenses within a month.\n"
)


class EmbedderOverride(Provider):
    """Serves `registry` as the app's `EmbedderRegistry`."""

    def __init__(self, registry: FakeEmbedderRegistry) -> None:
        super().__init__()
        self._registry = registry

    @provide(scope=Scope.APP)
    def embedders(self) -> EmbedderRegistry:
        return self._registry


async def upload(client, who, kb_id, name, content_type, data: bytes) -> dict:
    response = await client.post(
        "/upload/presigned",
        json={"fileName": name, "contentType": content_type, "fileSize": len(data)},
        headers=who.headers,
    )
    presigned = response.json()
    parts = urlsplit(presigned["uploadUrl"])
    put = await client.put(
        f"{parts.path}?{parts.query}", content=data, headers={"Content-Type": content_type}
    )
    assert put.status_code == 200, put.text
    created = await client.post(
        "/kb/files",
        json=association(
            kb_id, presigned, fileName=name, contentType=content_type, fileSize=len(data)
        ),
        headers=who.headers,
    )
    assert created.status_code == 201, created.text
    return created.json()["file"]


async def settle(client, who, kb_id, count: int = 1, within: float = 30.0) -> list[dict]:
    """The knowledge base's files once `count` of them are in a terminal state."""
    deadline = time.monotonic() + within
    while True:
        files = (await client.get(f"/kb/files?kbId={kb_id}", headers=who.headers)).json()["files"]
        done = [
            f
            for f in files
            if f["processingStatus"]
            in ("completed", "parse_failed", "chunk_failed", "extract_failed")
        ]
        if len(done) >= count:
            return files
        assert time.monotonic() < deadline, files
        await asyncio.sleep(0.2)
