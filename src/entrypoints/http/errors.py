"""One place that turns every error into the contract's `{"error", "details"}` body."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import structlog
from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR
from litestar.types import ExceptionHandlersMap

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
    a parameter the table knows gets the table's message, anything else the generic one."""
    details: list[dict[str, Any]] = []
    extra = error.extra if isinstance(error.extra, list) else []
    for item in extra:
        if isinstance(item, dict):
            field = _wire(str(item.get("key") or item.get("source") or "body"))
            if item.get("source") in ("query", "path"):
                known = param_error(field, "", request.route_handler.handler_name)
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


def unexpected_error(request: Request[Any, Any, Any], error: Exception) -> Response[dict[str, Any]]:
    log.exception("http.unhandled_error", path=request.url.path, error_type=type(error).__name__)
    return error_response(HTTP_500_INTERNAL_SERVER_ERROR, "Internal Server Error")


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    DomainError: domain_error,
    ValidationException: validation_error,
    HTTPException: http_error,
    EmbeddingFailed: embedding_failed,
    SpendCapReached: spend_cap_reached,
    Exception: unexpected_error,
}
