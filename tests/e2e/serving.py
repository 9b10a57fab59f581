"""`agent-platform serve` as a child process, for the end-to-end tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.conftest import free_port

BIN = Path(sys.executable).parent / "agent-platform"


class Server:
    """`serve` on a free port with its data under `data_dir` (the embedded database unless
    `env` names one); `env` adds to or replaces the inherited environment.

    Its output (and its children's) goes to a file beside `data_dir`: a pipe that nobody reads
    until the end fills after some 64 KiB of logs and stalls `serve` at its next line."""

    def __init__(self, data_dir: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        # Loading the search's models takes seconds of CPU a start; these tests do not search.
        self.env = {
            "AP_SEARCH_PRELOAD": "false",
            **os.environ,
            "AP_DATA_DIR": str(data_dir),
            "AP_PORT": str(self.port),
        }
        self.env.pop("AP_DATABASE_URL", None)
        self.env.update(env or {})
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = data_dir.parent / f"serve-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def launch(self) -> subprocess.Popen[bytes]:
        """The `serve` process, its output in `log_path`."""
        with self.log_path.open("wb") as log_file:
            return subprocess.Popen(
                [BIN, "serve"], env=self.env, stdout=log_file, stderr=subprocess.STDOUT
            )

    def start(self, timeout: float = 90) -> None:
        """Start it and wait until `/health` answers."""
        self.process = self.launch()
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"{self.base}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, "serve did not come up"
            time.sleep(0.3)

    def stop(self) -> str:
        """SIGTERM, then everything it printed."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(60)
        self.process = None
        return self.output()

    def output(self) -> str:
        """Everything it printed so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def headers(self, org: str = "org_chat", user: str = "u1") -> dict[str, str]:
        """A development bearer token of an admin of `org`."""
        token = subprocess.run(
            [BIN, "token", "--org", org, "--user", user, "--role", "admin"],
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return {"Authorization": f"Bearer {token}"}
