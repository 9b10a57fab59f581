"""Faults in what the service stands on: PostgreSQL restarted under load (a real `serve` and its
worker child on a database server of their own), the object store gone and back, an
OpenAI-compatible provider failing or hanging mid-stream, a standalone worker stopped with
SIGTERM while it holds a job. While a part is down the API answers a clear error at once
(503 in the contract's error shape, never a 500 or a hang); once it is back everything goes
through again without a restart, and no file or answer is left half-way."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from adapters.postgres.embedded import start_embedded_postgres
from adapters.queue.pgqueuer_worker import RetryPolicy as WorkerRetry
from entrypoints.config import Settings
from entrypoints.http.app import create_app
from entrypoints.http.errors import DATABASE_UNAVAILABLE, STORAGE_UNAVAILABLE
from entrypoints.wiring import dev_identity_provider
from entrypoints.worker.jobs import build_worker
from tests.conftest import free_port
from tests.e2e.serving import BIN, Server
from tests.http.chat_support import events
from tests.http.helpers import association
from tests.http.processing_support import EmbedderOverride
from tests.http.test_worker_fault import status_of
from tests.integration.test_chat_model_openai import (
    ScriptedServer,
    on_a_thread,
    sse_delta,
    sse_head,
)

TERMINAL = ("completed", "parse_failed", "chunk_failed", "extract_failed")
DOC = b"# Leave\n\nStaff receive thirty days of paid vacation each year.\n"


# --- PostgreSQL restarted under load ------------------------------------------------------


class StandalonePostgres:
    """An embedded PostgreSQL of this test's own, which the test stops and starts again on the
    same socket (what a restart or failover of a database server looks like to the service)."""

    def __init__(self, data_dir: Path) -> None:
        self.server, self.url = start_embedded_postgres(data_dir, database="ap_faults")
        self._socket_dir = self.server.get_postmaster_info().socket_dir

    def _pg_ctl(self, *args: str) -> None:
        from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]

        pg_ctl(list(args), pgdata=self.server.pgdata, user=self.server.system_user, timeout=60)

    def stop(self) -> None:
        """A fast shutdown: open sessions are ended, as a restart ends them."""
        self._pg_ctl("-w", "-m", "fast", "stop")

    def start(self) -> None:
        self._pg_ctl(
            "-w",
            "-o",
            '-h ""',
            "-o",
            f"-k {self._socket_dir}",
            "-l",
            str(self.server.log),
            "start",
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):  # already stopped
            self.stop()
        self.server.cleanup()


@dataclass
class Answer:
    at: float
    what: str
    status: int | None
    body: Any
    seconds: float


@dataclass
class Load:
    """Two clients in the background, one listing knowledge bases and one creating them, each
    request recorded with when it started, its status (None: no answer) and how long it took."""

    server: Server
    headers: dict[str, str]
    answers: list[Answer] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def _run(self, what: str) -> None:
        number = 0
        with httpx.Client(base_url=self.server.base, headers=self.headers, timeout=20) as http:
            while not self._stop.is_set():
                number += 1
                started = time.monotonic()
                try:
                    if what == "list":
                        response = http.get("/kb/manage")
                    else:
                        response = http.post("/kb/manage", json={"name": f"kb-{number}"})
                    status, body = response.status_code, response.json()
                except (httpx.HTTPError, ValueError) as error:
                    status, body = None, repr(error)
                self.answers.append(Answer(started, what, status, body, time.monotonic() - started))
                time.sleep(0.05)

    def __enter__(self) -> Load:
        for what in ("list", "create"):
            thread = threading.Thread(target=self._run, args=(what,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)


def upload_file(server: Server, headers: dict[str, str], kb_id: int, name: str) -> int:
    presigned = httpx.post(
        f"{server.base}/upload/presigned",
        json={"fileName": name, "contentType": "text/markdown", "fileSize": len(DOC)},
        headers=headers,
    )
    assert presigned.status_code == 200, presigned.text
    upload = presigned.json()
    put = httpx.put(upload["uploadUrl"], content=DOC, headers=upload["headers"])
    assert put.status_code == 200, put.text
    created = httpx.post(
        f"{server.base}/kb/files",
        json=association(kb_id, upload, fileName=name, fileSize=len(DOC)),
        headers=headers,
    )
    assert created.status_code == 201, created.text
    return int(created.json()["file"]["id"])


def wait_until_processed(server: Server, headers: dict[str, str], kb_id: int, within: float):
    deadline = time.monotonic() + within
    while True:
        files = httpx.get(
            f"{server.base}/kb/files", params={"kbId": kb_id}, headers=headers, timeout=20
        ).json()["files"]
        if files and all(f["processingStatus"] in TERMINAL for f in files):
            return files
        assert time.monotonic() < deadline, files
        time.sleep(0.5)


@pytest.fixture
def postgres() -> Iterator[StandalonePostgres]:
    # Its own directory, readable by the user the wheel runs PostgreSQL as under root.
    with tempfile.TemporaryDirectory(prefix="ap-faults-pg-") as root:
        os.chmod(root, 0o755)
        database = StandalonePostgres(Path(root))
        try:
            yield database
        finally:
            database.close()


def test_postgres_restarted_under_load(tmp_path, postgres):
    server = Server(
        tmp_path / "data",
        {
            "AP_DATABASE_URL": postgres.url,
            "AP_WORKER_IN_PROCESS": "true",
            "AP_WORKER_CONCURRENCY": "1",
            "AP_LOCAL_MODEL_PRELOAD": "false",
        },
    )
    server.start()
    try:
        headers = server.headers()
        kb = httpx.post(f"{server.base}/kb/manage", json={"name": "Before"}, headers=headers)
        assert kb.status_code == 201, kb.text
        kb_id = kb.json()["knowledgeBase"]["id"]
        # A file whose processing the restart may cut in the middle.
        upload_file(server, headers, kb_id, "before.md")
        with Load(server, headers) as load:
            time.sleep(1.5)
            down_at = time.monotonic()
            postgres.stop()
            time.sleep(4)
            postgres.start()
            up_at = time.monotonic()
            # Give the pool a moment to notice and the load a few rounds on the new server.
            deadline = up_at + 30
            while not any(
                a.at > up_at + 1 and a.status == 201 for a in list(load.answers)
            ) or not any(a.at > up_at + 1 and a.status == 200 for a in list(load.answers)):
                assert time.monotonic() < deadline, summary(load.answers, up_at)
                time.sleep(0.2)
            time.sleep(max(0.0, up_at + 4 - time.monotonic()))
        answers = list(load.answers)
        # Soon after, the API answers as before, without a restart of `serve`.
        late = [a for a in answers if a.at > up_at + 2]
        assert late and all(a.status in (200, 201) for a in late), summary(answers, up_at)
        # During the outage: a clear error, in the contract's shape, promptly.
        during = [a for a in answers if down_at <= a.at <= up_at]
        assert during, summary(answers, up_at)
        for answer in answers:
            assert answer.status is not None, summary(answers, up_at)
            assert answer.status in (200, 201, 503), summary(answers, up_at)
            assert answer.seconds < 10, summary(answers, up_at)
            if answer.status == 503:
                assert set(answer.body) == {"error"}, answer.body
                assert answer.body["error"] == DATABASE_UNAVAILABLE, answer.body
        assert any(a.status == 503 for a in during), summary(answers, up_at)
        # Nothing lost: every knowledge base the API said it created is there, once.
        created = {a.body["knowledgeBase"]["id"] for a in answers if a.status == 201}
        listed = httpx.get(f"{server.base}/kb/manage", headers=headers).json()["knowledgeBases"]
        ids = [k["id"] for k in listed]
        names = [k["name"] for k in listed]
        assert len(ids) == len(set(ids)) and len(names) == len(set(names))
        assert created <= set(ids)
        # The worker child recovered too: the file caught by the restart and one added now
        # are both processed.
        upload_file(server, headers, kb_id, "after.md")
        files = wait_until_processed(server, headers, kb_id, within=120)
        assert len(files) == 2
        assert all(f["processingStatus"] == "completed" for f in files), files
    finally:
        output = server.stop()
    # Every failure was an expected one: nothing went to the 500 handler.
    assert "http.unhandled_error" not in output, output[-4000:]
    assert "http.database_unavailable" in output


def summary(answers: list[Answer], up_at: float) -> str:
    return "\n".join(
        f"{a.at - up_at:+7.2f}s {a.what:6} {a.status} {a.seconds:5.2f}s {str(a.body)[:120]}"
        for a in answers
    )


# --- The object store unavailable ---------------------------------------------------------


class Moto:
    """An S3-compatible server (moto) on a fixed port that the test stops and starts again;
    its buckets and objects live in this process, so they outlive a restart."""

    def __init__(self) -> None:
        from moto.moto_server.threaded_moto_server import ThreadedMotoServer

        os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
        self._kind = ThreadedMotoServer
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: Any = None

    def start(self) -> None:
        self._server = self._kind(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


@pytest.fixture
def moto() -> Iterator[Moto]:
    server = Moto()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def app_settings(tmp_path: Path, **overrides: Any) -> Settings:
    return Settings(data_dir=tmp_path / "data", public_url="http://testserver.local", **overrides)


def bearer(settings: Settings, org: str = "org_faults") -> dict[str, str]:
    token = dev_identity_provider(settings).issue(user_id="u_faults", org_id=org, role="admin")
    return {"Authorization": f"Bearer {token}"}


async def s3_upload(client: AsyncTestClient, headers: dict[str, str], name: str) -> dict[str, Any]:
    """Presign and PUT one markdown file straight to the store; the association body."""
    response = await client.post(
        "/upload/presigned",
        json={"fileName": name, "contentType": "text/markdown", "fileSize": len(DOC)},
        headers=headers,
    )
    assert response.status_code == 200, response.text
    upload = response.json()
    async with httpx.AsyncClient() as http:
        put = await http.put(upload["uploadUrl"], content=DOC, headers=upload["headers"])
    assert put.status_code == 200, put.text
    return association(..., upload, fileName=name, fileSize=len(DOC))


async def files_of(client: AsyncTestClient, headers: dict[str, str], kb_id: int) -> list[dict]:
    response = await client.get("/kb/files", params={"kbId": kb_id}, headers=headers)
    assert response.status_code == 200, response.text
    return list(response.json()["files"])


async def test_the_object_store_down_and_back(
    tmp_path, database, clean, registry, moto, owner_engine
):
    import boto3

    boto3.client("s3", endpoint_url=moto.url, region_name="us-east-1").create_bucket(
        Bucket="ap-faults"
    )
    settings = app_settings(
        tmp_path, storage="s3", s3_bucket="ap-faults", s3_endpoint_url=moto.url, s3_path_style=True
    )
    headers = bearer(settings)
    skill_md = "---\nname: notes\ndescription: Keep notes.\n---\nWrite them down.\n"
    async with AsyncTestClient(
        app=create_app(settings, database, EmbedderOverride(registry))
    ) as client:
        kb = (await client.post("/kb/manage", json={"name": "S3"}, headers=headers)).json()
        kb_id = kb["knowledgeBase"]["id"]
        first = await s3_upload(client, headers, "first.md")
        created = await client.post("/kb/files", json={"kbId": kb_id, **first}, headers=headers)
        assert created.status_code == 201, created.text
        second = await s3_upload(client, headers, "second.md")
        skill = await client.post("/skills/manage", json={"skillMd": skill_md}, headers=headers)
        skill_id = skill.json()["skill"]["id"]
        bundled = {
            "skillId": skill_id,
            "path": "a/b.md",
            "content": base64.b64encode(b"# B").decode(),
        }
        added = await client.post("/skills/files", json=bundled, headers=headers)
        assert added.status_code == 201, added.text

        moto.stop()
        worker, container = build_worker(
            settings,
            database,
            EmbedderOverride(registry),
            concurrency=1,
            retry=WorkerRetry(max_attempts=8, initial_delay=timedelta(seconds=0.5)),
        )
        running = asyncio.create_task(worker.run())
        try:
            # While the store is down: what needs it answers 503 promptly, in the error shape.
            for method, path, kwargs in (
                ("POST", "/kb/files", {"json": {"kbId": kb_id, **second}}),
                ("GET", "/skills/files", {"params": {"skillId": skill_id, "path": "a/b.md"}}),
            ):
                started = time.monotonic()
                refused = await client.request(method, path, headers=headers, **kwargs)
                assert refused.status_code == 503, refused.text
                assert refused.json() == {"error": STORAGE_UNAVAILABLE}
                assert refused.headers["retry-after"]
                assert time.monotonic() - started < 8
            # Deleting a skill file is the contract's exception: 500, and the record is kept.
            kept = await client.delete(
                "/skills/files", params={"skillId": skill_id, "path": "a/b.md"}, headers=headers
            )
            assert kept.status_code == 500
            assert kept.json() == {"error": "Internal Server Error"}
            # What does not need it still works: listing, and signing (no call to the store).
            assert (await client.get("/kb/manage", headers=headers)).status_code == 200
            download = await client.get(
                "/kb/files/download",
                params={"kbId": kb_id, "fileId": first["fileId"]},
                headers=headers,
                follow_redirects=False,
            )
            assert download.status_code == 302
            # The first file's processing meets the outage: it is retried, not failed.
            await asyncio.sleep(3)
            (waiting,) = await files_of(client, headers, kb_id)
            assert waiting["processingStatus"] not in TERMINAL, waiting
            assert (await status_of(owner_engine, created.json()["file"]["id"]))[1] >= 1

            moto.start()
            deadline = time.monotonic() + 60
            while (await files_of(client, headers, kb_id))[0]["processingStatus"] not in TERMINAL:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.3)
            (done,) = await files_of(client, headers, kb_id)
            assert done["processingStatus"] == "completed", done
            # Back: the refused association goes through, the skill file is read.
            again = await client.post("/kb/files", json={"kbId": kb_id, **second}, headers=headers)
            assert again.status_code == 201, again.text
            read = await client.get(
                "/skills/files", params={"skillId": skill_id, "path": "a/b.md"}, headers=headers
            )
            assert read.status_code == 200 and read.content == b"# B"
        finally:
            worker.stop()
            await asyncio.wait_for(running, 30)
            await container.close()


# --- An OpenAI-compatible provider failing or hanging mid-stream ---------------------------


def http_error(status: str) -> bytes:
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: 2\r\n"
        "connection: close\r\n\r\n{}"
    ).encode()


async def chat_once(client: AsyncTestClient, headers: dict[str, str], agent_id: int):
    body = {
        "agentId": agent_id,
        "messages": [{"role": "user", "parts": [{"type": "text", "text": "Hi"}]}],
    }
    response = await client.post("/chat", json=body, headers=headers)
    assert response.status_code == 200, response.text
    thread_id = response.headers["x-thread-id"]
    deadline = time.monotonic() + 30
    while True:
        saved = (
            await client.get("/getConversation", params={"threadId": thread_id}, headers=headers)
        ).json()
        if saved["streamStatus"] != "in_progress":
            return events(response.content), saved
        assert time.monotonic() < deadline, saved
        await asyncio.sleep(0.1)


@pytest.fixture
def provider() -> Iterator[ScriptedServer]:
    """The scripted provider on an event loop of its own: the test client holds the test's
    loop while it reads a streamed answer."""
    with on_a_thread(ScriptedServer()) as server:
        yield server


async def test_an_openai_provider_failing_or_hanging_mid_stream(
    tmp_path, database, clean, provider
):
    settings = app_settings(
        tmp_path, openai_base_url=provider.url, openai_api_key="sk-test", chat_timeout=5
    )
    headers = bearer(settings)
    async with AsyncTestClient(app=create_app(settings, database)) as client:
        agent = await client.post(
            "/agents", json={"name": "Remote", "model": "openai:gpt-test"}, headers=headers
        )
        assert agent.status_code == 201, agent.text
        agent_id = agent.json()["agent"]["id"]
        cases = {
            # The provider keeps answering 500, to each of the adapter's three attempts.
            "500s": [[http_error("500 Internal Server Error")]] * 3,
            # The connection drops after the first words.
            "reset": [[sse_head(), sse_delta("Hel")]],
            # The provider stops sending after the first words (and never hangs up).
            "hang": [[sse_head(), sse_delta("Hel"), 30.0, sse_delta("lo")]],
        }
        for case, scripts in cases.items():
            provider.scripts[:] = [list(s) for s in scripts]
            started = time.monotonic()
            chunks, saved = await chat_once(client, headers, agent_id)
            assert time.monotonic() - started < settings.chat_timeout + 10, case
            assert [c if c == "[DONE]" else c["type"] for c in chunks][-3:] == [
                "error",
                "finish",
                "[DONE]",
            ], (case, chunks)
            assert chunks[-3]["errorText"].startswith("The model provider"), (case, chunks)
            assert saved["streamStatus"] == "failed", (case, saved)
            # The next answer works.
            provider.scripts[:] = [[sse_head(), sse_delta("Fine."), sse_delta(finish="stop")]]
            chunks, saved = await chat_once(client, headers, agent_id)
            assert saved["streamStatus"] == "completed", (case, saved)
            assert "Fine." in str(saved["messages"][-1]), (case, saved)


# --- SIGTERM to a standalone worker holding a job -------------------------------------------


async def test_sigterm_to_a_standalone_worker_finishes_the_job_in_hand(
    tmp_path, database, clean, registry, owner_engine
):
    settings = app_settings(tmp_path)
    headers = bearer(settings)
    async with AsyncTestClient(app=create_app(settings, database)) as client:
        kb = (await client.post("/kb/manage", json={"name": "Term"}, headers=headers)).json()
        kb_id = kb["knowledgeBase"]["id"]
        presigned = (
            await client.post(
                "/upload/presigned",
                json={"fileName": "a.md", "contentType": "text/markdown", "fileSize": len(DOC)},
                headers=headers,
            )
        ).json()
        parts = urlsplit(presigned["uploadUrl"])
        put = await client.put(
            f"{parts.path}?{parts.query}", content=DOC, headers=presigned["headers"]
        )
        assert put.status_code == 200, put.text
        body = {
            "kbId": kb_id,
            "fileId": presigned["fileId"],
            "fileName": "a.md",
            "fileKey": presigned["fileKey"],
            "contentKey": presigned["contentKey"],
            "contentType": "text/markdown",
            "fileSize": len(DOC),
        }
        record = (await client.post("/kb/files", json=body, headers=headers)).json()["file"]
        env = {
            **os.environ,
            "AP_DATABASE_URL": database.url,
            "AP_DATA_DIR": str(settings.data_dir),
            "AP_WORKER_CONCURRENCY": "1",
        }
        # The real worker loads the bundled embedding model on its first passage: seconds in
        # which it holds the job, in `chunking`, when SIGTERM arrives.
        worker = await asyncio.create_subprocess_exec(
            BIN, "worker", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 90
            while (await status_of(owner_engine, record["id"]))[0] != "chunking":
                assert time.monotonic() < deadline and worker.returncode is None
                await asyncio.sleep(0.05)
            worker.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(worker.wait(), 60)
        finally:
            if worker.returncode is None:
                worker.kill()
                await worker.wait()
        assert code == 0
        # It finished the job before leaving: processed once, nothing left for anyone else.
        assert await status_of(owner_engine, record["id"]) == ("completed", 1)
        async with owner_engine.connect() as connection:
            indexes = (
                await connection.scalars(
                    text("SELECT chunk_index FROM chunks ORDER BY chunk_index")
                )
            ).all()
            queued = (
                await connection.scalars(
                    text("SELECT count(*) FROM pgqueuer WHERE entrypoint = 'file.process'")
                )
            ).one()
        assert indexes == list(range(len(indexes))) and indexes
        assert queued == 0
