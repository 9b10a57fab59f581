"""The `serve` command as a user runs it: embedded database, migrations, HTTP, clean stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil

from tests.conftest import free_port

BIN = Path(sys.executable).parent / "agent-platform"


def test_serve_answers_and_stops_its_database_on_sigterm(tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "AP_DATA_DIR": str(tmp_path),
        "AP_PORT": str(port),
        "AP_LOG_FORMAT": "json",
    }
    env.pop("AP_DATABASE_URL", None)
    server = subprocess.Popen(
        [BIN, "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, server.stdout.read().decode() if server.stdout else ""
            assert time.monotonic() < deadline, "serve did not come up"
            time.sleep(0.3)
        token = subprocess.run(
            [BIN, "token", "--org", "org_e2e", "--user", "u1", "--role", "admin"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        headers = {"Authorization": f"Bearer {token}"}
        created = httpx.post(f"{base}/kb/manage", json={"name": "E2E"}, headers=headers)
        assert created.status_code == 201
        listed = httpx.get(f"{base}/kb/manage", headers=headers).json()
        assert [kb["name"] for kb in listed["knowledgeBases"]] == ["E2E"]
        assert httpx.get(f"{base}/kb/manage").status_code == 401
    finally:
        server.send_signal(signal.SIGTERM)
        output = server.communicate(timeout=30)[0].decode()
    assert '"event": "request"' in output and '"status": 201' in output
    time.sleep(1)
    leftovers = [
        p
        for p in psutil.process_iter(["name", "cmdline"])
        if p.info["name"] == "postgres" and str(tmp_path) in " ".join(p.info["cmdline"] or [])
    ]
    assert leftovers == []
