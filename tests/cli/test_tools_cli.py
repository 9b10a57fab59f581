"""`agent-platform tools add|list|refresh|remove`, run in process against the test database
and a real MCP server (the `mcp` SDK's) on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.cli.conftest import run
from tests.integration import tool_servers_support as support


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    """The test MCP server, served from a thread of its own (the CLI runs its own loop)."""
    served = support.Served(support.mcp_app())
    yield f"{served.url}/mcp"
    served.stop()


@pytest.fixture
def tools_env(cli_env, monkeypatch):
    monkeypatch.setenv("AP_TOOL_ALLOWED_HOSTS", "127.0.0.1")
    return cli_env


def test_a_server_is_added_listed_refreshed_and_removed(tools_env, capsys, mcp_url):
    code, out, err = run(
        capsys, "tools", "add", "docs", mcp_url, "--org", "org_t", "--json",
        "--header", "Authorization: Bearer s3cret", "--approval", "echo,fail",
    )  # fmt: skip
    assert (code, err) == (0, ""), err
    server = json.loads(out)
    assert server["status"] == "ready" and server["headerNames"] == ["Authorization"]
    assert server["requireApproval"] == ["echo", "fail"]
    assert {"echo", "slow", "image"} <= {tool["name"] for tool in server["tools"]}
    assert "s3cret" not in out

    code, out, _ = run(capsys, "tools", "list", "--org", "org_t")
    assert code == 0 and "docs" in out and "echo" in out and "s3cret" not in out
    code, out, _ = run(capsys, "tools", "list", "--org", "org_other", "--json")
    assert (code, json.loads(out)) == (0, [])

    code, out, _ = run(capsys, "tools", "refresh", str(server["id"]), "--org", "org_t", "--json")
    assert code == 0 and json.loads(out)["status"] == "ready"
    code, out, err = run(capsys, "tools", "remove", str(server["id"]), "--org", "org_other")
    assert (code, out) == (1, "") and "Tool server not found" in err
    code, out, _ = run(capsys, "tools", "remove", str(server["id"]), "--org", "org_t")
    assert (code, out.strip()) == (0, "deleted")
    code, out, _ = run(capsys, "tools", "list", "--org", "org_t", "--json")
    assert json.loads(out) == []


def test_refusals_are_reported_and_nothing_is_added(tools_env, capsys, mcp_url):
    # Not an allowed host: refused before any connection (nothing listens there either).
    code, out, err = run(
        capsys, "tools", "add", "elsewhere", "http://127.0.0.2:9/mcp", "--org", "o"
    )
    assert (code, out) == (1, "") and "Tool server address is not allowed" in err
    code, _, err = run(capsys, "tools", "add", "x", mcp_url, "--org", "o", "--header", "nocolon")
    assert code == 1 and "Each --header is 'Name: value'" in err
    code, _, err = run(capsys, "tools", "add", "Bad Name", mcp_url, "--org", "o")
    assert code == 1 and "name must be" in err
    code, out, _ = run(capsys, "tools", "list", "--org", "o", "--json")
    assert json.loads(out) == []


def test_an_unreachable_server_is_added_with_its_error(tools_env, capsys):
    port = support.free_port()
    code, out, err = run(
        capsys, "tools", "add", "down", f"http://127.0.0.1:{port}/mcp", "--org", "o", "--json"
    )
    assert code == 0
    server = json.loads(out)
    assert server["status"] == "error" and server["error"]
    assert err.startswith("warning: ")
