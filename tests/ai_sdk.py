"""Runs an SSE body through the `ai` npm package's own UI message stream parser under Node.

`run_ai_sdk_parser(body)` returns what `tests/node/parse_ui_stream.mjs` printed:
`{chunks, message, errors, streamErrors, exitCode}` (see that script). `assert_accepted`
checks that a stock AI SDK client took every chunk. Missing Node or a missing install of the
Node project fails the test with what to do: these tests are never skipped.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

NODE_PROJECT = Path(__file__).parent / "node"
PARSER = NODE_PROJECT / "parse_ui_stream.mjs"
MIN_NODE_MAJOR = 22
INSTALL_HINT = "run `make test`, or `npm ci --prefix tests/node` by hand"


@functools.cache
def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail(f"Node.js >= {MIN_NODE_MAJOR} is required for the AI SDK parser tests")
    version = subprocess.run(
        [node, "--version"], capture_output=True, text=True, check=True, timeout=30
    ).stdout.strip()
    major = int(version.lstrip("v").split(".")[0])
    if major < MIN_NODE_MAJOR:
        pytest.fail(f"Node.js >= {MIN_NODE_MAJOR} is required, found {version}")
    pinned = json.loads((NODE_PROJECT / "package.json").read_text())["dependencies"]["ai"]
    installed = NODE_PROJECT / "node_modules" / "ai" / "package.json"
    if not installed.exists():
        pytest.fail(f"the `ai` npm package is not installed in tests/node: {INSTALL_HINT}")
    if json.loads(installed.read_text())["version"] != pinned:
        pytest.fail(f"tests/node/node_modules does not hold ai@{pinned}: {INSTALL_HINT}")
    return node


def run_ai_sdk_parser(
    sse_bytes: bytes, *, timeout: float = 60, message: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Feed `sse_bytes` to `parseJsonEventStream` + `readUIMessageStream` and return the result;
    `message`: the UI message the stream continues (an answer resumed after approvals)."""
    env = dict(os.environ)
    if message is not None:
        env["UI_MESSAGE_JSON"] = json.dumps(message)
    completed = subprocess.run(
        [_node(), str(PARSER)],
        input=sse_bytes,
        capture_output=True,
        timeout=timeout,
        check=False,
        cwd=NODE_PROJECT,
        env=env,
    )
    try:
        result: dict[str, Any] = json.loads(completed.stdout)
    except ValueError:
        pytest.fail(
            f"the AI SDK parser printed no result (exit {completed.returncode}):\n"
            f"{completed.stderr.decode(errors='replace')}"
        )
    result["exitCode"] = completed.returncode
    return result


def assert_accepted(result: dict[str, Any]) -> None:
    """The parser rejected no chunk and assembled the message without a failure."""
    assert result["errors"] == [], result["errors"]
    assert result["exitCode"] == 0
