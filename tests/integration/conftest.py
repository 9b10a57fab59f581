"""Fixtures shared by the integration tests that need real model servers."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from adapters.local_model.bundled import bundled_smollm2_path
from tests.conftest import free_port


@pytest.fixture(scope="session")
def llama_server() -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server with the bundled model, on loopback; its
    base URL (`.../v1`). The model is served as `smollm2`."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(bundled_smollm2_path()),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "4096",
            "--model_alias",
            "smollm2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        process.wait(10)
