"""One place that turns every error into the contract's `{"error", "details"}` body."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import asyncpg
import botocore.exceptions
import structlog
from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR
from litestar.types import ExceptionHandlersMap

from adapters.postgres.database import CONNECTION_ERRORS, DatabaseUnavailable
from application.ports.embedder import EmbeddingFailed
from domain.errors import (
    Conflict,
    DomainError,
    Forbidden,
    Invalid,
    NotFound,
    PayloadTooLarge,
    Unauthenticated,
)
from domain.spend import SpendCapReached
from entrypoints.http.methods import documented_allow
from entrypoints.http.validation import param_error

log = structlog.get_logger("agent_platform.http")

STATUS_OF: dict[type[DomainError], int] = {
    Invalid: 400,
    Unauthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    PayloadTooLarge: 413,
}
CLIENT_GONE = "client disconnected prematurely"  # Litestar's words, reading a request body
CLIENT_CLOSED_REQUEST = 499
REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
    429: "Too Many Requests",
}


def error_response(
    status: int, message: str, details: list[dict[str, Any]] | None = None
) -> Response[dict[str, Any]]:
    body: dict[str, Any] = {"error": message}
    if details:
        body["details"] = details
    return Response(body, status_code=status, media_type=MediaType.JSON)


def domain_error(_: Request[Any, Any, Any], error: DomainError) -> Response[dict[str, Any]]:
    status = next(code for kind, code in STATUS_OF.items() if isinstance(error, kind))
    return error_response(status, error.message, [dict(d) for d in error.details])


def validation_error(
    request: Request[Any, Any, Any], error: ValidationException
) -> Response[dict[str, Any]]:
    """Litestar's own conversion failed (the `before_request` check normally answers first):
    a parameter declared with a rule gets its message, anything else the generic one."""
    details: list[dict[str, Any]] = []
    extra = error.extra if isinstance(error.extra, list) else []
    for item in extra:
        if isinstance(item, dict):
            field = _wire(str(item.get("key") or item.get("source") or "body"))
            if item.get("source") in ("query", "path"):
                known = param_error(request.route_handler, field, "")
                if known is not None:
                    return domain_error(request, known)
            details.append({"field": field, "message": str(item.get("message", ""))})
    return error_response(400, "Invalid request body", details or None)


def _wire(name: str) -> str:
    """The camelCase name a client sent for the handler's snake_case parameter."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def http_error(_: Request[Any, Any, Any], error: HTTPException) -> Response[dict[str, Any]]:
    status = error.status_code
    if status >= 500 and error.detail == CLIENT_GONE:
        # Nobody is there to read an answer: recorded as 499 (client closed the request, as
        # nginx logs it), so that a client hanging up mid-body never counts as a server error.
        log.info("http.client_disconnected")
        return error_response(CLIENT_CLOSED_REQUEST, "Client closed the request")
    if status >= 500:
        log.error("http.server_error", status=status, detail=error.detail)
        return error_response(status, "Internal Server Error")
    if status == 400:
        # Litestar reports a body that does not decode (msgspec's message) as a bare 400.
        detail = [{"field": "body", "message": str(error.detail)}] if error.detail else None
        return error_response(400, "Malformed request body", detail)
    response = error_response(status, REASONS.get(status, "Bad Request"))
    if error.headers:
        response.headers.update(error.headers)
    if status == 405 and "allow" in response.headers:
        response.headers["allow"] = documented_allow(response.headers["allow"])
    return response


def embedding_failed(_: Request[Any, Any, Any], error: EmbeddingFailed) -> Response[dict[str, Any]]:
    """A search whose query could not be embedded (the provider refused, is unreachable or is
    not configured): the service is fine, the model is not."""
    log.warning("http.embedding_failed", detail=error.message)
    return error_response(
        503, f"The knowledge base's embedding model is unavailable: {error.message}"
    )


def spend_cap_reached(
    _: Request[Any, Any, Any], error: SpendCapReached
) -> Response[dict[str, Any]]:
    """402 with each period reached, and `Retry-After` until the latest of their resets."""
    details = [
        {
            "period": breach.period.value,
            "cap": float(breach.cap),
            "spent": float(breach.spent),
            "resetsAt": breach.resets_at.isoformat().replace("+00:00", "Z"),
        }
        for breach in error.breaches
    ]
    response = error_response(402, error.message, details)
    response.headers["Retry-After"] = str(error.retry_after(datetime.now(UTC)))
    return response


DATABASE_UNAVAILABLE = "The database is temporarily unavailable. Try again shortly."
STORAGE_UNAVAILABLE = "The object store is temporarily unavailable. Try again shortly."
RETRY_AFTER_SECONDS = "2"
# What a lost, refused or closed database connection raises in the middle of a request (one
# that could not be had at all arrives as `DatabaseUnavailable`). OSError is left out: here it
# may as well come from the disk.
DATABASE_DOWN = tuple(kind for kind in CONNECTION_ERRORS if kind is not OSError)
# botocore's "could not connect / the connection dropped / timed out" family.
STORAGE_DOWN = (botocore.exceptions.ConnectionError, botocore.exceptions.HTTPClientError)


def unavailable(message: str) -> Response[dict[str, Any]]:
    response = error_response(503, message)
    response.headers["Retry-After"] = RETRY_AFTER_SECONDS
    return response


def database_unavailable(
    request: Request[Any, Any, Any], error: Exception
) -> Response[dict[str, Any]]:
    """The database is down or restarting: 503 at once, no traceback (an outage makes every
    request fail alike); the pool reconnects by itself once it is back."""
    if isinstance(error, asyncpg.exceptions.InterfaceError) and not _closed_connection(error):
        return unexpected_error(request, error)
    cause = error.__cause__ if isinstance(error, DatabaseUnavailable) else error
    log.warning("http.database_unavailable", path=request.url.path, error=_describe(cause))
    return unavailable(DATABASE_UNAVAILABLE)


def storage_error(request: Request[Any, Any, Any], error: Exception) -> Response[dict[str, Any]]:
    """The object store cannot be reached, or answers that it is failing (5xx): 503 at once.
    Any other refusal of the store is a fault of ours: 500."""
    if isinstance(error, botocore.exceptions.ClientError):
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if not isinstance(status, int) or status < 500:
            return unexpected_error(request, error)
    log.warning("http.storage_unavailable", path=request.url.path, error=_describe(error))
    return unavailable(STORAGE_UNAVAILABLE)


def _closed_connection(error: Exception) -> bool:
    return "connection is closed" in str(error) or "connection was closed" in str(error)


def _describe(error: BaseException | None) -> str:
    return f"{type(error).__name__}: {error}" if error is not None else ""


def unexpected_error(request: Request[Any, Any, Any], error: Exception) -> Response[dict[str, Any]]:
    log.exception("http.unhandled_error", path=request.url.path, error_type=type(error).__name__)
    return error_response(HTTP_500_INTERNAL_SERVER_ERROR, "Internal Server Error")


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    DomainError: domain_error,
    ValidationException: validation_error,
    HTTPException: http_error,
    EmbeddingFailed: embedding_failed,
    SpendCapReached: spend_cap_reached,
    DatabaseUnavailable: database_unavailable,
    asyncpg.exceptions.InterfaceError: database_unavailable,
    **dict.fromkeys(DATABASE_DOWN, database_unavailable),
    **dict.fromkeys(STORAGE_DOWN, storage_error),
    botocore.exceptions.ClientError: storage_error,
    Exception: unexpected_error,
}
