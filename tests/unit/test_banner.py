"""The banner `serve` prints once it listens (`entrypoints.banner`): the console's row is a link
that signs in as the README's administrator with the development identity provider, the plain
address with an external one, and how to build the console when it is not built."""

from __future__ import annotations

import json
from types import SimpleNamespace

import jwt
import pytest
import structlog

from entrypoints.banner import announce, console_state
from entrypoints.config import Settings
from entrypoints.http.console import CONSOLE

URL = "http://127.0.0.1:8000"
EXTERNAL = {"auth_jwks_url": "https://idp.example/jwks.json", "auth_issuer": "https://idp.example"}


def rows(output: str) -> dict[str, str]:
    lines = output[output.index("is ready") :].splitlines()[1:]
    return dict(line.strip().split("  ", 1) for line in lines if line.strip())


@pytest.fixture
def development(tmp_path) -> Settings:
    return Settings(data_dir=tmp_path / "data")


def test_development_console_row_is_a_hand_off_link(development, capsys):
    announce(development, URL, console=True)
    shown = {label: value.strip() for label, value in rows(capsys.readouterr().out).items()}
    assert list(shown) == ["API", "API reference", "Console", "Get a token"]
    link = shown["Console"]
    assert link.startswith(f"{URL}/console/#access_token=")
    claims = jwt.decode(link.partition("=")[2], options={"verify_signature": False})
    assert (claims["sub"], claims["o"]["id"], claims["o"]["rol"]) == (
        "user_ada",
        "org_demo",
        "admin",
    )
    assert claims["exp"] - claims["iat"] == 12 * 3600
    assert " token --org org_demo --user user_ada --role admin" in shown["Get a token"]


def test_external_provider_console_row_is_the_address(tmp_path, capsys):
    announce(Settings(data_dir=tmp_path, **EXTERNAL), URL, console=True)
    shown = rows(capsys.readouterr().out)
    assert shown["Console"].strip() == f"{URL}/console/"
    assert "Get a token" not in shown


def test_a_console_not_built_says_how_to_build_it(development, capsys):
    announce(development, URL, console=False)
    console = rows(capsys.readouterr().out)["Console"]
    assert "not built" in console and "make console" in console
    assert "access_token" not in console


def test_no_console_row_without_a_console(development, capsys):
    announce(development, URL)
    assert "Console" not in capsys.readouterr().out


def test_json_logs_carry_the_console_url_without_a_token(development, capsys, info_level):
    json_settings = Settings(data_dir=development.data_dir, log_format="json")
    with structlog.testing.capture_logs() as logs:
        announce(json_settings, URL, console=True)
        announce(json_settings, URL, console=False)
    built, not_built = logs
    assert built["event"] == "serve.ready"
    # Logs are kept and shipped: no sign-in token in them, only the address.
    assert built["console_url"] == f"{URL}/console/"
    assert "access_token" not in json.dumps(built)
    assert "console_url" not in not_built and not_built["console_build"] == "make console"
    assert capsys.readouterr().out == ""
    json.dumps(built)  # fit for a JSON line


def test_console_state_reads_the_app(tmp_path):
    built = tmp_path / "dist"
    built.mkdir()
    (built / "index.html").write_text("<!doctype html>")
    route = SimpleNamespace(path=CONSOLE)

    def app(folder):
        return SimpleNamespace(
            routes=[route],
            state=SimpleNamespace(console=SimpleNamespace(built=(folder / "index.html").is_file())),
        )

    assert console_state(app(built)) is True
    assert console_state(app(tmp_path / "none")) is False
    assert console_state(SimpleNamespace(routes=[SimpleNamespace(path="/health")])) is None
