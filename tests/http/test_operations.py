"""Operations: liveness, readiness (naming the part that fails) and the Prometheus metrics,
through the whole app."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
from botocore.exceptions import ClientError
from dishka import Provider, Scope, provide
from litestar.testing import AsyncTestClient
from prometheus_client.parser import text_string_to_metric_families

from adapters.postgres.database import create_pool
from adapters.postgres.operations import PgOperations
from adapters.storage.local_disk import LocalDiskStorage
from adapters.storage.s3 import S3ObjectStorage, s3_client
from application.ports.object_storage import ObjectStorage
from entrypoints.http.app import create_app
from entrypoints.http.metrics import HttpMetrics
from entrypoints.http.middleware import RequestContextMiddleware
from tests.fakes.chat import text_script
from tests.http.chat_support import make_agent, script, settled, user_message
from tests.http.helpers import add_file, make_kb

SECRET_DETAIL = "/var/secret/objects is gone"


class BrokenStorage:
    """Storage whose readiness check fails with a detail that must stay in the log."""

    async def check(self) -> None:
        raise OSError(SECRET_DETAIL)


class HangingStorage:
    async def check(self) -> None:
        await asyncio.sleep(30)


class StorageOverride(Provider):
    def __init__(self, storage: object) -> None:
        super().__init__()
        self._storage = storage

    @provide(scope=Scope.APP)
    def storage(self) -> ObjectStorage:
        return self._storage  # type: ignore[return-value]


class OperationsOverride(Provider):
    def __init__(self, operations: PgOperations) -> None:
        super().__init__()
        self._operations = operations

    @provide(scope=Scope.APP)
    def operations(self) -> PgOperations:
        return self._operations


@asynccontextmanager
async def app_client(settings, database, *providers: Provider) -> AsyncIterator[AsyncTestClient]:
    async with AsyncTestClient(app=create_app(settings, database, *providers)) as client:
        yield client


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, keyed by name and sorted labels."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict, name: str, **labels: str) -> float | None:
    return found.get((name, tuple(sorted(labels.items()))))


async def scrape(client: AsyncTestClient, **headers: str) -> str:
    response = await client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return response.text


async def test_live_answers_without_a_token(client):
    response = await client.get("/health/live")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response.headers["x-request-id"]
    assert (await client.get("/health")).json() == {"status": "ok"}


async def test_ready_when_every_part_answers(client):
    response = await client.get("/health/ready")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "status": "ok",
        "checks": {"database": "ok", "storage": "ok", "queue": "ok"},
    }


async def test_not_ready_names_failing_storage_and_keeps_the_detail_out(settings, database):
    async with app_client(settings, database, StorageOverride(BrokenStorage())) as client:
        response = await client.get("/health/ready")
    assert response.status_code == 503
    body = response.json()
    assert body["error"] == "Service not ready: storage"
    assert body["details"] == [{"field": "storage", "message": "did not answer"}]
    assert set(body) == {"error", "details"}
    assert SECRET_DETAIL not in response.text and "OSError" not in response.text


async def test_a_part_that_hangs_is_reported_after_the_bound(settings, database):
    async with app_client(settings, database, StorageOverride(HangingStorage())) as client:
        started = time.monotonic()
        response = await client.get("/health/ready")
        elapsed = time.monotonic() - started
    assert response.status_code == 503
    assert response.json()["details"] == [
        {"field": "storage", "message": "did not answer within 2 s"}
    ]
    assert elapsed < 10


async def test_not_ready_names_an_unreachable_database(settings, database):
    async def unreachable() -> asyncpg.Pool:
        # The embedded server listens on a socket directory; this one has no server in it.
        url = database.url.partition("?")[0] + "?host=/nonexistent-socket-dir"
        return await create_pool(url, app_role="agent_platform_app", size=1)

    operations = PgOperations(unreachable, cache_seconds=0)
    async with app_client(settings, database, OperationsOverride(operations)) as client:
        response = await client.get("/health/ready")
        scraped = await scrape(client)
    assert response.status_code == 503
    body = response.json()
    assert body["error"] == "Service not ready: database, queue"
    assert {d["field"] for d in body["details"]} == {"database", "queue"}
    # The scrape still answers, with the live metrics and the database marked down.
    assert value(samples(scraped), "ap_metrics_database_up") == 0


async def test_local_storage_check_fails_when_its_folder_is_unusable(tmp_path):
    root = tmp_path / "objects"
    storage = LocalDiskStorage(root, "http://testserver.local", b"k" * 32)
    await storage.check()
    assert list(root.iterdir()) == []  # the probe leaves nothing behind
    root.rmdir()
    root.write_bytes(b"not a folder")
    with pytest.raises(OSError):
        await storage.check()


async def test_s3_storage_check_writes_and_removes_an_object_under_its_prefix(s3_endpoint):
    async with s3_client(endpoint_url=s3_endpoint, region="us-east-1", path_style=True) as client:
        bucket = f"b{uuid.uuid4().hex[:12]}"
        await client.create_bucket(Bucket=bucket)
        await S3ObjectStorage(client, bucket).check()
        assert (await client.list_objects_v2(Bucket=bucket)).get("KeyCount") == 0
        with pytest.raises(ClientError):
            await S3ObjectStorage(client, f"{bucket}-missing").check()


async def test_metrics_count_requests_by_route_template(client, alice):
    kb = await make_kb(client, alice)
    await client.get("/kb/files", params={"kbId": kb["id"]}, headers=alice.headers)
    await client.get(f"/chat/{'0' * 8}-0000-4000-8000-{'0' * 12}/stream", headers=alice.headers)
    await client.get("/kb/manage")  # no token
    await client.get(f"/no/such/{kb['id']}")
    found = samples(await scrape(client))
    assert value(found, "ap_http_requests_total", route="/kb/manage", method="POST", status="201")
    assert value(found, "ap_http_requests_total", route="/kb/files", method="GET", status="200")
    assert value(found, "ap_http_requests_total", route="/kb/manage", method="GET", status="401")
    assert value(
        found,
        "ap_http_requests_total",
        route="/chat/{thread_id}/stream",
        method="GET",
        status="404",  # an unknown conversation: its id is no label
    )
    assert value(found, "ap_http_requests_total", route="unmatched", method="GET", status="404")
    assert value(found, "ap_http_request_duration_seconds_count", route="/kb/manage", method="POST")
    routes = {dict(labels).get("route") for (_, labels) in found}
    assert "/metrics" not in routes
    assert not any(route and "/no/such" in route for route in routes)
    assert value(found, "ap_chat_streams_open") == 0
    assert value(found, "ap_metrics_database_up") == 1


async def test_metrics_count_files_and_jobs_across_organizations(client, alice, bob):
    await add_file(client, alice, (await make_kb(client, alice))["id"])
    await add_file(client, bob, (await make_kb(client, bob))["id"])
    found = samples(await scrape(client))
    assert value(found, "ap_files", state="parsing") == 2
    assert value(found, "ap_jobs", kind="file.process", state="queued") == 2


async def test_metrics_count_model_tokens_and_cost_by_provider(chat, alice, holder):
    script(holder, text_script("Twenty-five days.", usage=(40, 2)))
    agent = await make_agent(chat, alice, model="openai:gpt-4o-mini")
    secret_text = "What is the secret leave policy of Zanzibar?"
    response = await chat.post(
        "/chat",
        json={"agentId": agent["id"], "messages": user_message(secret_text)},
        headers=alice.headers,
    )
    thread_id = response.headers["x-thread-id"]
    await settled(chat, alice, thread_id)
    found: dict[Any, float] = {}
    text = ""
    for _ in range(100):  # the ledger is written just after the answer settles
        text = await scrape(chat)
        found = samples(text)
        if (value(found, "ap_model_tokens_total", provider="openai", direction="input") or 0) >= 40:
            break
        await asyncio.sleep(0.05)
    assert (value(found, "ap_model_tokens_total", provider="openai", direction="input") or 0) >= 40
    assert (value(found, "ap_model_tokens_total", provider="openai", direction="output") or 0) >= 2
    assert (value(found, "ap_model_cost_usd_total", provider="openai") or 0) > 0
    assert value(found, "ap_http_requests_total", route="/chat", method="POST", status="200")
    for private in ("org_a", alice.user, "alice@a.test", "Zanzibar", thread_id, "Bearer"):
        assert private not in text, private


async def test_open_streams_are_counted_while_they_are_sent():
    metrics = HttpMetrics()
    seen: list[float | None] = []

    def gauge() -> float | None:
        return metrics.registry.get_sample_value("ap_chat_streams_open")

    async def stream(scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        seen.append(gauge())
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})

    async def send(message: Any) -> None:
        return None

    async def receive() -> Any:
        return {"type": "http.disconnect"}

    app = RequestContextMiddleware(stream, metrics=metrics)
    scope = {"type": "http", "method": "POST", "path": "/chat", "headers": []}
    await app(scope, receive, send)
    assert seen == [1.0]
    assert gauge() == 0.0


async def test_a_metrics_token_guards_the_scrape(settings, database, alice):
    token = "metrics-token-0123456789"
    guarded = dataclasses.replace(settings, metrics_token=token)
    async with app_client(guarded, database) as client:
        missing = await client.get("/metrics")
        wrong = await client.get("/metrics", headers={"Authorization": "Bearer nope"})
        user = await client.get("/metrics", headers=alice.headers)
        text = await scrape(client, Authorization=f"Bearer {token}")
        still_public = await client.get("/health/ready")
    for refused in (missing, wrong, user):
        assert refused.status_code == 401
        assert refused.json() == {"error": "Unauthorized"}
    assert "ap_http_requests_total" in text
    assert still_public.status_code == 200


async def test_the_operations_routes_are_documented_as_public(session_client):
    doc = (await session_client.get("/schema/openapi.json")).json()
    for path in ("/health/live", "/health/ready", "/metrics"):
        assert doc["paths"][path]["get"]["security"] == [], path
    scrape_doc = doc["paths"]["/metrics"]["get"]["responses"]
    assert set(scrape_doc["200"]["content"]) == {"text/plain"}
    assert "401" in scrape_doc
    assert {"200", "503"} <= set(doc["paths"]["/health/ready"]["get"]["responses"])


async def test_a_scrape_reads_the_database_once_per_cache_period(database, owner_engine):
    pool = await create_pool(database.url, app_role="agent_platform_app", size=1)
    reads = 0

    async def connect() -> asyncpg.Pool:
        nonlocal reads
        reads += 1
        return pool

    operations = PgOperations(connect, cache_seconds=60)
    try:
        first, *others = await asyncio.gather(*(operations.snapshot() for _ in range(20)))
        assert all(other is first for other in others)
        assert reads == 1
        fresh = PgOperations(connect, cache_seconds=0)
        assert await fresh.snapshot() is not await fresh.snapshot()
    finally:
        await pool.close()


def test_requests_with_unknown_methods_share_one_label_set():
    metrics = HttpMetrics()
    for n in range(50):
        metrics.observe(route="/kb/files", method=f"M{n}", status=200, seconds=0.01)
    metrics.observe(route="/kb/files", method="GET", status=200, seconds=0.01)
    found = samples(metrics.render(None).decode())
    assert (
        value(found, "ap_http_requests_total", route="/kb/files", method="OTHER", status="200")
        == 50
    )
    assert (
        value(found, "ap_http_requests_total", route="/kb/files", method="GET", status="200") == 1
    )


def test_request_counts_and_latencies_read_as_prometheus_clients_own_would():
    """The plain counts behind the request metrics expose what prometheus_client's Counter and
    Histogram give for the same requests (their `_created` series aside)."""
    from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

    from entrypoints.http.metrics import _LATENCY_BUCKETS

    registry = CollectorRegistry()
    counter = Counter("ap_http_requests", "c", ("route", "method", "status"), registry=registry)
    histogram = Histogram(
        "ap_http_request_duration_seconds",
        "h",
        ("route", "method"),
        buckets=_LATENCY_BUCKETS,
        registry=registry,
    )
    metrics = HttpMetrics()
    answers = [
        ("/kb/files", "GET", 200, 0.004),
        ("/kb/files", "GET", 200, 0.005),  # on a bound: counted in that bucket
        ("/kb/files", "GET", 404, 0.3),
        ("/kb/manage", "POST", 201, 31.0),  # above every bound
        (None, "GET", 404, 0.0001),
        ("/kb/files", "BREW", 200, 0.02),
    ]
    for route, method, status, seconds in answers:
        metrics.observe(route=route, method=method, status=status, seconds=seconds)
        labels = (route or "unmatched", method if method != "BREW" else "OTHER")
        counter.labels(*labels, str(status)).inc()
        histogram.labels(*labels).observe(seconds)
    expected = {
        key: sample
        for key, sample in samples(generate_latest(registry).decode()).items()
        if not key[0].endswith("_created")
    }
    found = samples(metrics.render(None).decode())
    assert {key: found[key] for key in expected} == expected
    assert (
        value(
            found,
            "ap_http_request_duration_seconds_bucket",
            route="/kb/files",
            method="GET",
            le="0.005",
        )
        == 2
    )
