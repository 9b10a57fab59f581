"""Log lines: one JSON object per line in production, whatever the values logged."""

from __future__ import annotations

import json
import logging
import re
import uuid
from datetime import UTC, datetime

import pytest
import structlog

from entrypoints.logging import _dumps, access_log, configure_logging, utc_stamp

render = structlog.processors.JSONRenderer(serializer=_dumps)


def test_json_lines_hold_any_value_and_never_raise():
    line = render(
        None,
        "info",
        {
            "event": "request",
            "status": 201,
            "at": datetime(2026, 11, 23, tzinfo=UTC),
            "id": uuid.UUID(int=7),
            "odd": object(),
            "keys": {1: "one", (2, 3): "pair"},
            "nan": float("nan"),
        },
    )
    assert isinstance(line, str) and "\n" not in line
    parsed = json.loads(line)
    assert parsed["event"] == "request" and parsed["status"] == 201
    assert parsed["at"] == "2026-11-23T00:00:00Z"
    assert parsed["id"] == "00000000-0000-0000-0000-000000000007"
    assert parsed["odd"].startswith("<object object")
    assert parsed["keys"]["1"] == "one"


@pytest.fixture
def json_logging():
    config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    configure_logging("json", "info")
    yield
    access_log.direct(None)
    structlog.configure(**config)
    root.handlers, root.level = handlers, level


def test_the_access_line_is_the_line_structlog_writes(json_logging, capsys):
    fields = {
        "method": "GET",
        "route": "/kb/manage",
        "status": 200,
        "duration_ms": 1.25,
        "org_id": "org_a",
        "user_id": None,
    }
    structlog.contextvars.bind_contextvars(request_id="r1")
    try:
        access_log.request("r1", *fields.values())  # written directly
        access_log.direct(None)
        access_log.request("r1", *fields.values())  # through structlog's processors
    finally:
        structlog.contextvars.unbind_contextvars("request_id")
    direct, piped = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    stamp = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
    assert stamp.match(direct.pop("timestamp")) and stamp.match(piped.pop("timestamp"))
    assert list(direct.items()) == list(piped.items())
    assert direct == {**fields, "event": "request", "request_id": "r1", "level": "info"}


def test_above_info_the_access_line_is_left_out(capsys):
    config = structlog.get_config()
    try:
        configure_logging("json", "warning")
        access_log.request("r1", "GET", "/kb/manage", 200, 1.0, "org_a", "u1")
    finally:
        access_log.direct(None)
        structlog.configure(**config)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "ns",
    [
        1_795_500_000_000_000_000,  # a whole second: no fraction, as isoformat writes it
        1_795_500_000_000_001_000,
        1_795_500_000_123_456_789,  # nanoseconds are dropped, not rounded up
        1_795_500_059_999_999_000,
        1_795_500_060_000_000_000,  # the next second's text, not the cached one's
        946_684_799_999_999_000,
    ],
)
def test_the_access_lines_stamp_is_the_one_structlogs_timestamper_writes(ns):
    second, rest = divmod(ns, 1_000_000_000)
    moment = datetime.fromtimestamp(second, UTC).replace(microsecond=rest // 1000)
    assert utc_stamp(ns) == moment.isoformat().replace("+00:00", "Z")
    assert utc_stamp(ns) == utc_stamp(ns)  # from the cache the second time


def test_an_access_line_msgspec_cannot_write_is_still_written(json_logging, capsys):
    access_log.request("r1", "GET", "/kb/manage", 200, 1.0, "org_\ud800", None)
    line = json.loads(capsys.readouterr().err)
    assert line["org_id"] == "org_\ud800" and line["request_id"] == "r1"
