"""The `serve` command as a user runs it: embedded database, migrations, HTTP, clean stop."""

from __future__ import annotations

import json
import os
import subprocess
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
    (ready,) = [line for line in lines if line.get("event") == "serve.ready"]
    assert ready["url"] == server.base and " token --org " in ready["token_command"]
    # The console's address when built (no sign-in token in a log line), how to build it
    # otherwise.
    assert ready.get("console_url") == f"{base}/console/" or (
        ready.get("console_build") == "make console"
    )
    time.sleep(1)
    leftovers = [
        p
        for p in psutil.process_iter(["name", "cmdline"])
        if p.info["name"] == "postgres" and str(tmp_path) in " ".join(p.info["cmdline"] or [])
    ]
    assert leftovers == []


def test_serve_prints_its_address_and_how_to_get_a_token_once_it_listens(tmp_path):
    console = tmp_path / "console"  # a built console, as `make serve` builds it
    console.mkdir()
    (console / "index.html").write_text("<!doctype html><title>console</title>")
    server = Server(
        tmp_path / "data",
        {"AP_LOG_FORMAT": "console", "AP_LOG_LEVEL": "info", "AP_CONSOLE_DIR": str(console)},
    )
    server.start(timeout=60)
    try:
        deadline = time.monotonic() + 10
        while "is ready" not in server.output():
            assert time.monotonic() < deadline, server.output()
            time.sleep(0.2)
        output = server.output()
        banner = output[output.index("Agent Platform is ready") :].splitlines()
        rows = [line.strip().split("  ", 1) for line in banner[1:5]]
        assert [(label, value.strip()) for label, value in rows[:2]] == [
            ("API", server.base),
            ("API reference", f"{server.base}/schema"),
        ]
        # The console's hand-off link signs in as the README's administrator.
        label, link = rows[2][0], rows[2][1].strip()
        assert label == "Console" and link.startswith(f"{server.base}/console/#access_token=")
        page = httpx.get(link.partition("#")[0])
        assert page.status_code == 200 and "<title>console</title>" in page.text
        handed = {"Authorization": f"Bearer {link.partition('#access_token=')[2]}"}
        assert httpx.get(f"{server.base}/admin/getUsersInOrg", headers=handed).status_code == 200
        label, command = rows[3][0], rows[3][1].strip()
        assert label == "Get a token" and "agent-platform token --org " in command
        # After uvicorn's own line: the banner comes once the socket is bound.
        assert output.index("Uvicorn running on") < output.index("Agent Platform is ready")
        # The command, run as printed in a shell with no AP_* setting, gives a token this
        # server accepts.
        env = {name: value for name, value in os.environ.items() if not name.startswith("AP_")}
        token = subprocess.run(
            command, shell=True, env=env, check=True, capture_output=True, text=True
        ).stdout.strip()
        answer = httpx.get(f"{server.base}/kb/manage", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200
    finally:
        server.stop()
