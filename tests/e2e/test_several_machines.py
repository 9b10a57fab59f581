"""Several machines: one PostgreSQL, one S3-compatible store and one OpenAI-compatible model
server, shared by two `serve` processes without a worker of their own
(`AP_WORKER_IN_PROCESS=false`) and two `agent-platform worker` processes. Each process has a
data dir of its own, as on a machine of its own; they share only the database, the bucket, the
models and the development signing key (as they would share an identity provider).

The app connects as a login role that is only a member of the app role and the schema owner
migrates, as the README's production set-up says; the database starts empty and both servers
migrate it as they start, at the same moment (they take turns on an advisory lock). The models
are scripted (answers ` w0 w1 ...`, hashed embeddings): no model is loaded anywhere, so the
processes' start dominates the module's time.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import asyncpg
import boto3
import httpx
import pytest
from alembic.script import ScriptDirectory

from adapters.identity.dev_provider import DevIdentityProvider
from adapters.postgres.database import asyncpg_dsn
from adapters.postgres.embedded import start_embedded_postgres
from adapters.postgres.migrations import alembic_config
from tests.conftest import free_port
from tests.e2e.serving import BIN
from tests.http.helpers import association

ORG = "org_machines"
BUCKET = "ap-machines"
DIMENSIONS = 16
LOGIN_ROLE = "ap_machines_login"
# Seconds four processes may take to start together: well under a minute on 2 idle cores, far
# more when other work shares them.
START_WITHIN = 240
# model name: (content tokens, seconds before each)
MODELS = {
    "scripted": (12, 0.0),
    "scripted-slow": (80, 0.05),
    "scripted-endless": (2000, 0.05),
}


def answer(model: str) -> str:
    return "".join(f" w{i}" for i in range(MODELS[model][0]))


# --- an OpenAI-compatible model server, scripted ------------------------------------------


@dataclass
class ProviderStats:
    lock: threading.Lock = field(default_factory=threading.Lock)
    open_streams: dict[str, int] = field(default_factory=dict)
    aborted: dict[str, int] = field(default_factory=dict)
    embedded_texts: int = 0

    def add(self, counter: dict[str, int], model: str, delta: int) -> None:
        with self.lock:
            counter[model] = counter.get(model, 0) + delta


class ScriptedModels(BaseHTTPRequestHandler):
    """`/v1/chat/completions` streams `MODELS[model]`'s tokens (a body without `stream` gets
    the whole text); `/v1/embeddings` hashes each text into a unit vector of `DIMENSIONS`."""

    protocol_version = "HTTP/1.1"
    stats: ProviderStats

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if self.path.endswith("/embeddings"):
            self._embeddings(body)
        elif self.path.endswith("/chat/completions"):
            self._completion(body)
        else:
            self._json(404, {"error": {"message": "not found"}})

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _embeddings(self, body: dict[str, Any]) -> None:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        with self.stats.lock:
            self.stats.embedded_texts += len(texts)
        data = [
            {"object": "embedding", "index": i, "embedding": hashed(text)}
            for i, text in enumerate(texts)
        ]
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        self._json(200, {"object": "list", "data": data, "model": body["model"], "usage": usage})

    def _completion(self, body: dict[str, Any]) -> None:
        model = str(body.get("model", "scripted"))
        tokens, delay = MODELS.get(model, MODELS["scripted"])
        usage = {"prompt_tokens": 20, "completion_tokens": tokens, "total_tokens": 20 + tokens}
        if not body.get("stream"):
            message = {"role": "assistant", "content": answer(model)}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            self._json(
                200,
                {
                    "id": "chatcmpl-s",
                    "object": "chat.completion",
                    "model": model,
                    "created": int(time.time()),
                    "choices": [choice],
                    "usage": usage,
                },
            )
            return
        base = {
            "id": "chatcmpl-s",
            "object": "chat.completion.chunk",
            "model": model,
            "created": int(time.time()),
        }

        def event(payload: dict[str, Any]) -> None:
            data = b"data: " + json.dumps({**base, **payload}).encode() + b"\n\n"
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def delta(content: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"choices": [{"index": 0, "delta": content, "finish_reason": finish}]}

        self.stats.add(self.stats.open_streams, model, 1)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            event(delta({"role": "assistant", "content": ""}))
            for i in range(tokens):
                if delay:
                    time.sleep(delay)
                event(delta({"content": f" w{i}"}))
            event(delta({}, "stop"))
            if (body.get("stream_options") or {}).get("include_usage"):
                event({"choices": [], "usage": usage})
            self.wfile.write(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.stats.add(self.stats.aborted, model, 1)
            self.close_connection = True
        finally:
            self.stats.add(self.stats.open_streams, model, -1)


def hashed(text: str) -> list[float]:
    vector = [0.0] * DIMENSIONS
    for word in text.lower().split():
        digest = hashlib.sha256(word.strip(".,:;!?#").encode()).digest()
        vector[digest[0] % DIMENSIONS] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector] if any(vector) else [1.0] + [0.0] * (DIMENSIONS - 1)


# --- the processes ----------------------------------------------------------------------


# `agent-platform worker` once the schema is at head (argv: owner URL, head revision), as a
# process manager starts it after the migration job; its imports are done while it waits.
WORKER_AFTER_MIGRATION = """
import asyncio, sys, time
import asyncpg
from adapters.postgres.database import asyncpg_dsn
from entrypoints import cli


async def version():
    connection = await asyncpg.connect(asyncpg_dsn(sys.argv[1]))
    try:
        return await connection.fetchval("SELECT max(version_num) FROM alembic_version")
    except asyncpg.UndefinedTableError:
        return None
    finally:
        await connection.close()


while asyncio.run(version()) != sys.argv[2]:
    time.sleep(0.2)
sys.exit(cli.main(["worker"]))
"""


class Machine:
    """One `agent-platform` process with a data dir of its own, its output in a file."""

    def __init__(self, name: str, root: Path, env: dict[str, str], command: list[str]) -> None:
        self.name = name
        self.data_dir = root / name
        self.log = root / f"{name}.log"
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {**env, "AP_DATA_DIR": str(self.data_dir), "AP_PORT": str(self.port)}
        self.command = command
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, key: Path) -> None:
        (self.data_dir / "dev-idp").mkdir(parents=True)
        shutil.copy(key, self.data_dir / "dev-idp" / "signing-key.pem")
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                self.command, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_until(self, ready: Any, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            assert self.process is not None and self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, f"{self.name} did not come up:\n{self.output()}"
            time.sleep(0.2)

    def healthy(self) -> bool:
        try:
            return httpx.get(f"{self.base}/health", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def terminate(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()

    def wait(self) -> None:
        if self.process is None:
            return
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class Cluster:
    servers: list[Machine]
    workers: list[Machine]
    owner_url: str
    stats: ProviderStats
    headers: dict[str, str]

    async def sql(self, query: str, *args: Any) -> list[asyncpg.Record]:
        """As the schema owner (which row-level security does not hold back)."""
        connection = await asyncpg.connect(asyncpg_dsn(self.owner_url))
        try:
            return list(await connection.fetch(query, *args))
        finally:
            await connection.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, tmp_root, embedded, s3_endpoint) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("machines")
    # A database of its own, empty, on the session's embedded server (the `embedded` fixture's
    # data dir). The two servers migrate it as they start, both at once.
    _server, owner_url = start_embedded_postgres(tmp_root / "pg", "ap_machines")
    asyncio.run(_create_roles(owner_url))
    app_url = owner_url.replace("postgres@", f"{LOGIN_ROLE}@", 1)
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").create_bucket(
        Bucket=BUCKET
    )
    stats = ProviderStats()
    handler = type("Handler", (ScriptedModels,), {"stats": stats})
    models = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    models.daemon_threads = True
    threading.Thread(target=models.serve_forever, daemon=True).start()
    env = {
        **os.environ,
        "AP_DATABASE_URL": app_url,
        "AP_DATABASE_MIGRATION_URL": owner_url,
        "AP_DATABASE_POOL_SIZE": "5",
        "AP_WORKER_IN_PROCESS": "false",
        "AP_STORAGE": "s3",
        "AP_S3_BUCKET": BUCKET,
        "AP_S3_ENDPOINT_URL": s3_endpoint,
        "AP_S3_PATH_STYLE": "true",
        "AP_OPENAI_BASE_URL": f"http://127.0.0.1:{models.server_address[1]}/v1",
        "AP_OPENAI_API_KEY": "sk-scripted",
        "AP_DEFAULT_CHAT_MODEL": "openai:scripted",
        "AP_DEFAULT_EMBEDDING_MODEL": "openai:scripted-embedding",
        "AP_LOG_FORMAT": "json",
        "AP_WORKER_CONCURRENCY": "1",
    }
    env.pop("AP_PUBLIC_URL", None)
    key = root / "signing-key.pem"
    token = DevIdentityProvider(key).issue(user_id="u_ops", org_id=ORG, role="admin")
    # Workers do not migrate: they work once the servers have brought the schema to head.
    head = ScriptDirectory.from_config(alembic_config(owner_url)).get_current_head()
    worker_command = [sys.executable, "-c", WORKER_AFTER_MIGRATION, owner_url, str(head)]
    servers = [Machine(f"server-{i}", root, env, [str(BIN), "serve"]) for i in (1, 2)]
    workers = [Machine(f"worker-{i}", root, env, worker_command) for i in (1, 2)]
    everyone = servers + workers
    try:
        for machine in everyone:
            machine.start(key)
        with ThreadPoolExecutor(len(everyone)) as pool:
            waits = [pool.submit(s.wait_until, s.healthy, START_WITHIN) for s in servers]
            waits += [
                pool.submit(w.wait_until, lambda w=w: "worker.started" in w.output(), START_WITHIN)
                for w in workers
            ]
            for wait in waits:
                wait.result()
        yield Cluster(servers, workers, owner_url, stats, {"Authorization": f"Bearer {token}"})
    finally:
        for machine in everyone:
            machine.terminate()
        for machine in everyone:
            machine.wait()
        models.shutdown()
    for machine in everyone:
        output = machine.output()
        assert "Traceback" not in output, f"{machine.name}:\n{output}"


async def _create_roles(owner_url: str) -> None:
    """The app role as migration 0001 would create it (roles are the server's, not the
    database's: the login role's grant needs it now), and a login role that is only its
    member, as the README's production set-up has."""
    connection = await asyncpg.connect(asyncpg_dsn(owner_url))
    try:
        for role, options in (
            ("agent_platform_app", "NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE"),
            (LOGIN_ROLE, "LOGIN"),
        ):
            if not await connection.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role):
                await connection.execute(f'CREATE ROLE "{role}" {options}')
        await connection.execute(f'GRANT agent_platform_app TO "{LOGIN_ROLE}"')
    finally:
        await connection.close()


@pytest.fixture
async def http(cluster) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(headers=cluster.headers, timeout=30) as client:
        yield client


def message(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "parts": [{"type": "text", "text": text}]}]


async def make_agent(http: httpx.AsyncClient, base: str, model: str) -> int:
    created = await http.post(f"{base}/agents", json={"name": model, "model": f"openai:{model}"})
    assert created.status_code == 201, created.text
    return int(created.json()["agent"]["id"])


async def until(check: Any, what: str, within: float = 30, every: float = 0.2) -> Any:
    deadline = time.monotonic() + within
    while True:
        result = await check()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(every)


async def conversation(http: httpx.AsyncClient, base: str, thread_id: str) -> dict[str, Any]:
    response = await http.get(f"{base}/getConversation", params={"threadId": thread_id})
    assert response.status_code == 200, response.text
    return dict(response.json())


def chunks_of(raw: str) -> list[dict[str, Any]]:
    assert raw.endswith("data: [DONE]\n\n"), raw[-300:]
    return [
        json.loads(line.removeprefix("data: "))
        for line in raw.splitlines()
        if line.startswith("data: {")
    ]


def text_of(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["delta"] for c in chunks if c["type"] == "text-delta")


# --- the tests ----------------------------------------------------------------------------


@dataclass
class DueTask:
    task_id: int
    due_at: float


@pytest.fixture(scope="module", autouse=True)
async def due_task(cluster) -> DueTask:
    """A yearly task, made due now, before the first test: both workers' schedulers (each
    ticks every 10 s) see it while the other tests run."""
    one = cluster.servers[0].base
    async with httpx.AsyncClient(headers=cluster.headers, timeout=30) as http:
        agent_id = await make_agent(http, one, "scripted")
        created = await http.post(
            f"{one}/scheduled-tasks",
            json={
                "agentId": agent_id,
                "name": "Yearly report",
                "prompt": "Report.",
                "cron": "0 0 1 1 *",
                "timezone": "UTC",
            },
        )
        assert created.status_code == 201, created.text
    task_id = int(created.json()["task"]["id"])
    await cluster.sql(
        "UPDATE scheduled_tasks SET next_run_at = now() - interval '1 second' WHERE id = $1",
        task_id,
    )
    return DueTask(task_id, time.monotonic())


async def test_uploads_presigned_on_one_server_associated_on_the_other_run_once(cluster, http):
    one, two = (s.base for s in cluster.servers)
    s3 = cluster.servers[0].env["AP_S3_ENDPOINT_URL"]
    kb = await http.post(
        f"{one}/kb/manage",
        json={
            "name": "Handbook",
            "embeddingModel": "openai:scripted-embedding",
            "embeddingDimensions": DIMENSIONS,
        },
    )
    assert kb.status_code == 201, kb.text
    kb_id = kb.json()["knowledgeBase"]["id"]
    documents = {
        f"policy-{i}.md": f"# Policy {i}\n\nTopic {word} is explained here.\n".encode()
        for i, word in enumerate(("holidays", "expenses"))
    }
    file_ids = []
    for i, (name, data) in enumerate(documents.items()):
        presigner, associator = (one, two) if i % 2 == 0 else (two, one)
        upload = (
            await http.post(
                f"{presigner}/upload/presigned",
                json={"fileName": name, "contentType": "text/markdown", "fileSize": len(data)},
            )
        ).json()
        assert upload["uploadUrl"].startswith(f"{s3}/{BUCKET}/")  # straight to the bucket
        async with httpx.AsyncClient() as plain:
            put = await plain.put(upload["uploadUrl"], content=data, headers=upload["headers"])
        assert put.status_code == 200, put.text
        associated = await http.post(
            f"{associator}/kb/files",
            json=association(kb_id, upload, fileName=name, fileSize=len(data)),
        )
        assert associated.status_code == 201, associated.text
        file_ids.append(associated.json()["file"]["id"])

    async def settled() -> list[dict[str, Any]] | None:
        files = (await http.get(f"{one}/kb/files", params={"kbId": kb_id})).json()["files"]
        done = all(
            f["processingStatus"] in ("completed", "parse_failed", "chunk_failed") for f in files
        )
        return files if done else None

    files = await until(settled, "the files to be processed", within=40)
    assert {f["processingStatus"] for f in files} == {"completed"}, files
    found = await http.post(f"{two}/kb/search", json={"kbId": kb_id, "query": "expenses"})
    assert found.status_code == 200, found.text
    assert found.json()["results"][0]["fileName"] == "policy-1.md"

    # Each file's job was picked once and succeeded once, and none is left in the queue.
    log = await cluster.sql(
        "SELECT job_id, status::text AS status, count(*) AS n FROM pgqueuer_log "
        "WHERE entrypoint = 'file.process' GROUP BY job_id, status"
    )
    counts: dict[int, dict[str, int]] = {}
    for row in log:
        counts.setdefault(row["job_id"], {})[row["status"]] = row["n"]
    assert len(counts) == len(documents), counts
    assert all(c == {"queued": 1, "picked": 1, "successful": 1} for c in counts.values()), counts
    left = await cluster.sql("SELECT count(*) AS n FROM pgqueuer WHERE entrypoint = 'file.process'")
    assert left[0]["n"] == 0
    chunks = await cluster.sql(
        "SELECT file_record_id, count(*) AS n FROM chunks WHERE file_record_id = ANY($1) "
        "GROUP BY file_record_id",
        file_ids,
    )
    assert sorted(r["file_record_id"] for r in chunks) == sorted(file_ids)
    assert all(r["n"] == 1 for r in chunks), chunks


async def test_one_conversation_goes_on_through_either_server(cluster, http):
    one, two = (s.base for s in cluster.servers)
    agent_id = await make_agent(http, one, "scripted")
    first = await http.post(
        f"{one}/chat", json={"agentId": agent_id, "messages": message("Hello from one.")}
    )
    assert first.status_code == 200, first.text
    thread_id = first.headers["x-thread-id"]
    assert text_of(chunks_of(first.text)) == answer("scripted")
    second = await http.post(
        f"{two}/chat",
        json={"agentId": agent_id, "threadId": thread_id, "messages": message("And from two.")},
    )
    assert second.status_code == 200, second.text
    assert second.headers["x-thread-id"] == thread_id
    assert text_of(chunks_of(second.text)) == answer("scripted")
    saved = await conversation(http, one, thread_id)
    assert saved["streamStatus"] == "completed"
    assert [m["role"] for m in saved["messages"]] == ["user", "assistant", "user", "assistant"]


async def test_a_stream_started_on_one_server_resumes_on_the_other(cluster, http):
    one, two = (s.base for s in cluster.servers)
    agent_id = await make_agent(http, one, "scripted-slow")
    body = {"agentId": agent_id, "messages": message("Take your time.")}
    async with http.stream("POST", f"{one}/chat", json=body) as original:
        assert original.status_code == 200
        thread_id = original.headers["x-thread-id"]
        lines = original.aiter_lines()
        async for line in lines:
            if '"text-delta"' in line:
                break
        resumed = await http.get(f"{two}/chat/{thread_id}/stream")
        rest = [line async for line in lines]
    assert resumed.status_code == 200, resumed.text
    chunks = chunks_of(resumed.text)
    # From the answer's start, all of it, though the other server produced it.
    assert chunks[0]["type"] == "start" and chunks[-1]["type"] == "finish"
    assert text_of(chunks) == answer("scripted-slow")
    assert "data: [DONE]" in rest
    assert (await conversation(http, two, thread_id))["streamStatus"] == "completed"
    assert (await http.get(f"{two}/chat/{thread_id}/stream")).status_code == 204


async def test_a_cancel_sent_to_the_other_server_stops_the_answer(cluster, http):
    one, two = (s.base for s in cluster.servers)
    agent_id = await make_agent(http, one, "scripted-endless")
    accepted = await http.post(
        f"{one}/chat",
        json={"agentId": agent_id, "messages": message("Never stop.")},
        headers={"X-Stream-Response": "false"},
    )
    assert accepted.status_code == 202, accepted.text
    thread_id = accepted.json()["threadId"]

    async def some_text() -> bool:
        saved = await conversation(http, two, thread_id)
        parts = (
            saved["messages"][-1]["parts"] if saved["messages"][-1]["role"] == "assistant" else []
        )
        return bool(parts and parts[0].get("text"))

    await until(some_text, "the first words of the answer")
    cancelled = await http.post(f"{two}/chat/{thread_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["cancelled"] is True
    stopped_at = time.monotonic()

    async def ended() -> dict[str, Any] | None:
        saved = await conversation(http, two, thread_id)
        return saved if saved["streamStatus"] != "in_progress" else None

    saved = await until(ended, "the answer to stop", within=10)
    assert saved["streamStatus"] == "cancelled"
    kept = saved["messages"][-1]["parts"][0]["text"]
    assert kept and answer("scripted-endless").startswith(kept)
    assert len(kept) < len(answer("scripted-endless")) // 4
    # The producing server closed its model call: the model stream is no longer open.

    async def closed() -> bool:
        return cluster.stats.open_streams.get("scripted-endless", 0) == 0

    await until(closed, "the model call to be closed", within=10)
    assert time.monotonic() - stopped_at < 10


async def test_a_due_occurrence_runs_once_with_two_schedulers(cluster, due_task, http):
    two = cluster.servers[1].base

    async def finished() -> list[dict[str, Any]] | None:
        response = await http.get(
            f"{two}/scheduled-tasks/runs", params={"taskId": due_task.task_id}
        )
        runs = response.json()["runs"]
        return runs if runs and runs[0]["status"] in ("succeeded", "failed") else None

    (run,) = await until(finished, "the scheduled run", within=40)
    assert run["status"] == "succeeded", run
    saved = await conversation(http, two, run["threadId"])
    assert saved["messages"][-1]["parts"][0]["text"] == answer("scripted")
    # Each worker ticks every 10 s: past that, both have seen the task since it fell due.
    await asyncio.sleep(max(0.0, due_task.due_at + 11 - time.monotonic()))
    runs = (
        await http.get(f"{two}/scheduled-tasks/runs", params={"taskId": due_task.task_id})
    ).json()["runs"]
    assert [r["id"] for r in runs] == [run["id"]], runs
    picked = await cluster.sql(
        "SELECT count(*) AS n FROM pgqueuer_log WHERE entrypoint = 'task.run' AND status = 'picked'"
    )
    assert picked[0]["n"] == 1
    # And no job of any kind in this module (files, titles, the run) was taken twice.
    twice = await cluster.sql(
        "SELECT job_id, entrypoint FROM pgqueuer_log WHERE status = 'picked' "
        "GROUP BY job_id, entrypoint HAVING count(*) > 1"
    )
    assert twice == []
