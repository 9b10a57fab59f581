"""ASGI middleware: request ids, a bound on the headers' size and one access-log line per
request; bearer authentication; the request's dependency scope."""

from __future__ import annotations

import itertools
import json
import os
import re
import time
from collections.abc import Sequence
from typing import cast

import structlog
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from adapters.identity.jwks import MAX_TOKEN_LENGTH
from application.ports.token_verifier import TokenVerifier
from domain.errors import Unauthenticated
from domain.identity import Identity
from entrypoints.http.injection import CONTAINER_KEY
from entrypoints.http.metrics import HttpMetrics
from entrypoints.logging import access_log

REQUEST_ID_HEADER = b"x-request-id"
_CLIENT_ID = re.compile(rb"^[A-Za-z0-9._:-]{1,128}$")
PUBLIC_PATHS = (
    r"^/schema",
    r"^/\.well-known/",
    r"^/storage/",
    r"^/health$",
    r"^/health/(live|ready)$",
    r"^/metrics$",  # its own bearer token when AP_METRICS_TOKEN is set
    r"^/webhooks/identity$",  # signed by the identity provider instead
    r"^/webhooks/inbound-email$",  # signed by the mail provider instead
    r"^/console(/|$)",  # the web console's files, config.json and development sign-in
)
# Names and values of a request's headers together; `serve` refuses a larger head before it
# reaches the app (entrypoints.http.server), this holds under any other server.
MAX_HEADER_BYTES = 64 * 1024
HEADERS_TOO_LARGE = "Request Header Fields Too Large"
_AUTHENTICATED_SCOPES = frozenset({ScopeType.HTTP, ScopeType.WEBSOCKET})


class _RequestIds:
    """32 hex digits per request, unique across processes: a random half drawn when the
    process starts (and again in a forked child), then a counter. A request id names a request
    in the logs; it need not be unguessable, and this costs a tenth of `uuid4()`'s system call.
    """

    def __init__(self) -> None:
        self._restart()
        os.register_at_fork(after_in_child=self._restart)

    def _restart(self) -> None:
        self._prefix = os.urandom(8).hex()
        self._counter = itertools.count(1)

    def next(self) -> str:
        return f"{self._prefix}{next(self._counter):016x}"


_request_ids = _RequestIds()


class RequestContextMiddleware:
    """Gives every request an id (the client's `X-Request-ID` when sane), echoes it on the
    response, binds it to the log context and writes one access-log line at the end. Refuses
    a request whose headers pass `MAX_HEADER_BYTES` (431) before anything reads them. With
    `metrics`, also counts the request by route template and status, times it until its
    headers leave, and keeps the gauge of open event streams while one is sent."""

    def __init__(self, app: ASGIApp, metrics: HttpMetrics | None = None) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        size, sent = 0, b""
        for name, value in scope.get("headers", ()):
            size += len(name) + len(value)
            if name == REQUEST_ID_HEADER:
                sent = value
        too_large = size > MAX_HEADER_BYTES
        if too_large or not _CLIENT_ID.fullmatch(sent):
            request_id = _request_ids.next()
        else:
            request_id = sent.decode()
        scope.setdefault("state", {})["request_id"] = request_id
        status = 500
        started = time.perf_counter()
        answered: float | None = None
        streaming = False
        metrics = self.metrics
        id_header = (REQUEST_ID_HEADER, request_id.encode())

        async def send_with_id(message: Message) -> None:
            nonlocal status, answered, streaming
            if message["type"] == "http.response.start":
                status = message["status"]
                answered = time.perf_counter()
                headers = []
                for header in message.get("headers", ()):
                    name = header[0].lower()
                    if name == REQUEST_ID_HEADER:
                        continue
                    if name == b"content-type" and metrics is not None:
                        streaming = header[1].lower().startswith(b"text/event-stream")
                    headers.append(header)
                headers.append(id_header)
                message["headers"] = headers
                if streaming:
                    metrics.open_streams.inc()  # type: ignore[union-attr]
            await send(message)

        structlog.contextvars.bind_contextvars(request_id=request_id)
        try:
            if too_large:
                await _refuse(send_with_id, 431, HEADERS_TOO_LARGE)
            else:
                await self.app(scope, receive, send_with_id)
        finally:
            if streaming:
                metrics.open_streams.dec()  # type: ignore[union-attr]
            self._record(scope, request_id, status, started, answered)
            structlog.contextvars.unbind_contextvars("request_id")

    def _record(
        self, scope: Scope, request_id: str, status: int, started: float, answered: float | None
    ) -> None:
        """The request's count and latency (until its headers left), and its access line."""
        route = scope.get("path_template") or None
        method = cast("str | None", scope.get("method"))
        finished = time.perf_counter()
        if self.metrics is not None:
            self.metrics.observe(
                route=route,
                method=method,
                status=status,
                seconds=(answered or finished) - started,
            )
        user = scope.get("user")
        access_log.request(
            request_id,
            method,
            route or scope.get("path"),
            status,
            round((finished - started) * 1000, 2),
            getattr(user, "org_id", None),
            getattr(user, "user_id", None),
        )


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


class BearerAuthenticationMiddleware:
    """Every route but the public ones (`exclude`, patterns on the path) needs
    `Authorization: Bearer <JWT>`; the verified identity becomes `request.user`. A token longer
    than `MAX_TOKEN_LENGTH` (16 KiB), or a request with two Authorization headers, is refused
    (401) before any verifier reads it. CORS preflights (OPTIONS) pass, as with Litestar's
    authentication middleware, whose rules this keeps while reading the header straight from
    the ASGI scope: its connection and header objects cost more than the check itself."""

    def __init__(self, app: ASGIApp, exclude: Sequence[str] = PUBLIC_PATHS) -> None:
        self.app = app
        self._public = re.compile("|".join(exclude))
        self._verifier: TokenVerifier | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in _AUTHENTICATED_SCOPES and scope.get("method") != "OPTIONS":
            route_handler = scope.get("route_handler")
            path = (
                scope["raw_path"].decode()
                if getattr(route_handler, "is_mount", False)
                else scope["path"]
            )
            if not self._public.search(path):
                identity, token = await self._authenticate(scope)
                scope["user"] = identity
                scope["auth"] = token
        await self.app(scope, receive, send)

    async def _authenticate(self, scope: Scope) -> tuple[Identity, str]:
        values = [value for name, value in scope["headers"] if name.lower() == b"authorization"]
        if len(values) != 1:  # none, or two that could name two people
            raise Unauthenticated("Unauthorized")
        scheme, _, token = values[0].decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not token.strip() or len(token) > MAX_TOKEN_LENGTH:
            raise Unauthenticated("Unauthorized")
        verifier = self._verifier
        if verifier is None:  # an app-scoped dependency: resolved once for the app's life
            container = scope["app"].state.dishka_container
            verifier = self._verifier = await container.get(TokenVerifier)
        token = token.strip()
        return await verifier.verify(token), token


class RequestScopeMiddleware:
    """Opens the request's dishka scope once the bearer token is verified, with the verified
    identity as its context (as the CLI and the worker give theirs), so that every scope of
    the app container is opened the same way; dishka's `inject` reads it from the request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        user = scope.get("user")
        context = {Identity: user} if isinstance(user, Identity) else {}
        # Where `injection.inject` reads it, without building a Request to set it.
        async with scope["app"].state.dishka_container(context) as container:
            scope.setdefault("state", {})[CONTAINER_KEY] = container
            await self.app(scope, receive, send)
