from __future__ import annotations

from pathlib import Path

import pytest

from entrypoints.cli import main


@pytest.fixture
def cli_env(monkeypatch, database, tmp_path, clean) -> Path:
    """The CLI's environment: the test database, and a data folder of its own (returned)."""
    monkeypatch.setenv("AP_DATABASE_URL", database.url)
    monkeypatch.setenv("AP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("AP_LOG_LEVEL", "warning")
    return tmp_path / "data"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """Run the CLI with `argv`: its exit code, stdout and stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
