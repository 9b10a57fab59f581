"""Public routes: health, readiness, metrics and the development identity provider's JWKS."""

from __future__ import annotations

import asyncio
import hmac
from typing import Any, Literal

import structlog
from dishka import FromDishka
from litestar import Request, Response, get
from litestar.openapi.datastructures import ResponseSpec

from adapters.identity.dev_provider import DevIdentityProvider
from adapters.postgres.operations import OperationsSnapshot, PgOperations
from application.ports.object_storage import ObjectStorage
from domain.errors import NotFound, Unauthenticated
from entrypoints.config import Settings
from entrypoints.http.injection import inject
from entrypoints.http.metrics import CONTENT_TYPE, HttpMetrics
from entrypoints.http.openapi import errors
from entrypoints.http.readiness import MESSAGES, OK, run_checks
from entrypoints.http.schemas import Camel

log = structlog.get_logger("agent_platform.http.system")

# A scrape answers with what it has when the database is slow: its counts are then left out.
SNAPSHOT_TIMEOUT = 5.0
Outcome = Literal["ok", "failed", "timeout"]


class Liveness(Camel):
    """The process answers."""

    status: Literal["ok"]


class ReadinessChecks(Camel):
    """Each part's outcome: `ok`, `failed` or `timeout` (no answer within the bound)."""

    database: Outcome
    storage: Outcome
    queue: Outcome


class Ready(Camel):
    """Every part answers."""

    status: Literal["ok"]
    checks: ReadinessChecks


class NotReady(Camel):
    """The contract's error body: `details` has one entry per failing part."""

    error: str
    details: list[dict[str, str]]


@get(
    "/health",
    tags=["System"],
    security=[],
    responses=errors(public=True),
    summary="Liveness (no token needed)",
)
async def health() -> dict[str, str]:
    return {"status": "ok"}


@get(
    "/health/live",
    tags=["System"],
    security=[],
    responses=errors(public=True),
    summary="Liveness: 200 while the process runs (no token needed, touches no dependency)",
)
async def live() -> Liveness:
    return Liveness(status="ok")


@get(
    "/health/ready",
    tags=["System"],
    security=[],
    responses={
        200: ResponseSpec(
            data_container=Ready,
            description="The database, object storage and job queue all answer",
            generate_examples=False,
        ),
        503: ResponseSpec(
            data_container=NotReady,
            description="A part did not answer: `error` and `details` name it",
            generate_examples=False,
        ),
        **errors(public=True),
    },
    summary="Readiness (no token needed)",
    description="Checks the database, object storage and job queue side by side, each within "
    "2 seconds.",
)
@inject
async def ready(
    operations: FromDishka[PgOperations], storage: FromDishka[ObjectStorage]
) -> Response[Any]:
    checks = await run_checks(
        {
            "database": operations.ping_database,
            "storage": storage.check,
            "queue": operations.ping_queue,
        }
    )
    outcomes = ReadinessChecks(**checks)  # type: ignore[arg-type]
    failing = [name for name, outcome in checks.items() if outcome != OK]
    if not failing:
        return Response(Ready(status="ok", checks=outcomes), status_code=200)
    body = NotReady(
        error=f"Service not ready: {', '.join(failing)}",
        details=[{"field": name, "message": MESSAGES[checks[name]]} for name in failing],
    )
    return Response(body, status_code=503)


@get(
    "/metrics",
    tags=["System"],
    security=[],
    media_type=CONTENT_TYPE,
    responses=errors(401, public=True),
    summary="Prometheus metrics (the metrics token when AP_METRICS_TOKEN is set)",
    description="The Prometheus text format. When the deployment sets `AP_METRICS_TOKEN`, the "
    "request needs `Authorization: Bearer <that token>` (401 otherwise); no user token is "
    "involved.",
)
@inject
async def metrics(
    request: Request[Any, Any, Any],
    settings: FromDishka[Settings],
    operations: FromDishka[PgOperations],
) -> Response[bytes]:
    if settings.metrics_token is not None:
        _require_token(request, settings.metrics_token)
    snapshot: OperationsSnapshot | None = None
    try:
        async with asyncio.timeout(SNAPSHOT_TIMEOUT):
            snapshot = await operations.snapshot()
    except Exception as error:
        log.warning("metrics could not read the database", error=f"{type(error).__name__}: {error}")
    registry: HttpMetrics = request.app.state.http_metrics
    return Response(registry.render(snapshot), media_type=CONTENT_TYPE)


def _require_token(request: Request[Any, Any, Any], expected: str) -> None:
    headers = request.headers.getall("authorization", [])
    scheme, _, token = headers[0].partition(" ") if len(headers) == 1 else ("", "", "")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        token.strip().encode(), expected.encode()
    ):
        raise Unauthenticated("Unauthorized")


@get(
    "/.well-known/jwks.json",
    tags=["System"],
    security=[],
    responses=errors(404, public=True),
    summary="The development identity provider's public keys (404 with an external provider)",
)
@inject
async def jwks(dev: FromDishka[DevIdentityProvider | None]) -> dict[str, Any]:
    if dev is None:
        raise NotFound("Not Found")
    return dev.jwks()


PUBLIC_OPERATIONS = (("/health/live", "get"), ("/health/ready", "get"), ("/metrics", "get"))


def complete_system_document(document: dict[str, Any]) -> None:
    """`security: []` on the operations routes (Litestar drops an empty list) and the metrics'
    text body."""
    paths = document.get("paths", {})
    for path, method in PUBLIC_OPERATIONS:
        operation = paths.get(path, {}).get(method)
        if operation is not None:
            operation["security"] = []
    scrape = paths.get("/metrics", {}).get("get")
    if scrape is not None:
        scrape.setdefault("responses", {})["200"] = {
            "description": "The metrics in the Prometheus text format (version 0.0.4)",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
