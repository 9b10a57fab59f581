"""Log lines: one JSON object per line in production, whatever the values logged."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import structlog

from entrypoints.logging import _dumps

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
