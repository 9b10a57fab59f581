"""The `serve` command as a user runs it: embedded database, migrations, HTTP, clean stop."""

from __future__ import annotations

import json
import time

import httpx
import psutil

from tests.e2e.serving import Server


def test_serve_answers_and_stops_its_database_on_sigterm(tmp_path):
    server = Server(tmp_path, {"AP_LOG_FORMAT": "json"})
    server.start(timeout=60)
    try:
        base = server.base
        headers = server.headers(org="org_e2e")
        created = httpx.post(f"{base}/kb/manage", json={"name": "E2E"}, headers=headers)
        assert created.status_code == 201
        listed = httpx.get(f"{base}/kb/manage", headers=headers).json()
        assert [kb["name"] for kb in listed["knowledgeBases"]] == ["E2E"]
        assert httpx.get(f"{base}/kb/manage").status_code == 401
    finally:
        output = server.stop()
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    requests = [line for line in lines if line.get("event") == "request"]
    assert {"method": "POST", "route": "/kb/manage", "status": 201} in [
        {key: line.get(key) for key in ("method", "route", "status")} for line in requests
    ]
    assert all(line["request_id"] and line["timestamp"] for line in requests)
    time.sleep(1)
    leftovers = [
        p
        for p in psutil.process_iter(["name", "cmdline"])
        if p.info["name"] == "postgres" and str(tmp_path) in " ".join(p.info["cmdline"] or [])
    ]
    assert leftovers == []
