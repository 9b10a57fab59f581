"""The `agent-platform` commands, run in process against the test database."""

from __future__ import annotations

import json
import re

from litestar.testing import AsyncTestClient

from entrypoints.config import Settings
from entrypoints.database import Database
from entrypoints.http.app import create_app
from tests.cli.conftest import run


def test_kb_commands_run_the_use_cases(cli_env, capsys, owner_engine, tmp_path):
    code, out, _ = run(capsys, "kb", "create", "--org", "org_cli", "--name", "Manuals")
    assert code == 0
    kb = json.loads(out)
    assert kb["name"] == "Manuals" and kb["embeddingModel"] == "local:all-MiniLM-L6-v2"

    document = tmp_path / "guide.md"
    document.write_text("# Guide\n")
    code, out, _ = run(
        capsys,
        "kb",
        "add-file",
        str(document),
        "--kb",
        str(kb["id"]),
        "--org",
        "org_cli",
        "--no-wait",
    )
    assert code == 0
    added = json.loads(out)
    assert (added["fileName"], added["processingStatus"]) == ("guide.md", "parsing")
    stored = cli_env / "objects" / "orgs" / "org_cli" / "files" / added["fileId"] / "guide.md"
    assert stored.read_text() == "# Guide\n"

    code, out, _ = run(capsys, "kb", "list", "--org", "org_cli")
    assert code == 0 and out.split("\t")[:3] == [str(kb["id"]), "Manuals", "1 file(s)"]
    code, out, _ = run(capsys, "kb", "list", "--org", "org_other")
    assert (code, out) == (0, "")


def test_add_file_goes_to_the_knowledge_base_named_not_the_first(cli_env, capsys, tmp_path):
    """The README's CLI example: `kb create` prints the new id, `add-file --kb` uses it."""
    _, out, _ = run(capsys, "kb", "create", "--org", "org_cli", "--name", "First")
    first = json.loads(out)["id"]
    _, out, _ = run(capsys, "kb", "create", "--org", "org_cli", "--name", "Second")
    second = json.loads(out)["id"]
    document = tmp_path / "holidays.md"
    document.write_text("# Holidays\n")
    code, _, err = run(
        capsys,
        "kb",
        "add-file",
        str(document),
        "--kb",
        str(second),
        "--org",
        "org_cli",
        "--no-wait",
    )
    assert code == 0, err
    code, out, _ = run(capsys, "kb", "list", "--org", "org_cli")
    files = {row.split("\t")[0]: row.split("\t")[2] for row in out.splitlines()}
    assert files == {str(first): "0 file(s)", str(second): "1 file(s)"}


def test_kb_create_with_source_email_gives_an_address_list_shows(cli_env, capsys, monkeypatch):
    code, _, err = run(
        capsys, "kb", "create", "--org", "org_cli", "--name", "Inbox", "--source", "email"
    )
    assert code == 1 and "Inbound e-mail is not configured" in err
    monkeypatch.setenv("AP_INBOUND_EMAIL_DOMAIN", "in.example.test")
    monkeypatch.setenv("AP_INBOUND_EMAIL_SECRET", "s" * 40)
    code, out, _ = run(
        capsys, "kb", "create", "--org", "org_cli", "--name", "Inbox", "--source", "email"
    )
    assert code == 0
    inbox = json.loads(out)
    assert re.fullmatch(r"kb-[0-9a-f]{20}@in\.example\.test", inbox["inboundEmailAddress"])
    code, out, _ = run(capsys, "kb", "create", "--org", "org_cli", "--name", "Plain")
    assert code == 0 and "inboundEmailAddress" not in json.loads(out)

    code, out, _ = run(capsys, "kb", "list", "--org", "org_cli")
    rows = {row.split("\t")[1]: row.split("\t") for row in out.splitlines()}
    assert rows["Inbox"][2:] == ["0 file(s)", "0 B", "ready", inbox["inboundEmailAddress"]]
    assert rows["Plain"][2:] == ["0 file(s)", "0 B", "ready"]


def test_kb_errors_are_reported_not_raised(cli_env, capsys, tmp_path):
    code, _, err = run(
        capsys, "kb", "create", "--org", "o", "--name", "x", "--embedding-model", "acme:x"
    )
    assert code == 1 and "Unknown provider 'acme'" in err
    code, _, err = run(
        capsys, "kb", "add-file", str(tmp_path / "missing.pdf"), "--kb", "1", "--org", "o"
    )
    assert code == 1 and "cannot read" in err and "no file was added" in err
    (tmp_path / "a.txt").write_text("x")
    code, _, err = run(
        capsys, "kb", "add-file", str(tmp_path / "a.txt"), "--kb", "nope", "--org", "o"
    )
    assert code == 1 and "Valid knowledge base ID is required" in err


async def test_token_command_prints_a_token_the_service_accepts(cli_env, capsys, database):
    code, out, _ = run(
        capsys,
        "token",
        "--org",
        "org_t",
        "--user",
        "user_t",
        "--role",
        "admin",
        "--email",
        "t@example.com",
        "--ttl",
        "120",
    )
    assert code == 0
    token = out.strip()
    settings = Settings(data_dir=cli_env)
    async with AsyncTestClient(app=create_app(settings, Database(database.url))) as client:
        response = await client.get("/kb/manage", headers={"Authorization": f"Bearer {token}"})
        jwks = (await client.get("/.well-known/jwks.json")).json()
    assert response.status_code == 200
    assert len(jwks["keys"]) == 1


def test_bad_configuration_is_named(monkeypatch, capsys):
    monkeypatch.setenv("AP_LOG_FORMAT", "xml")
    monkeypatch.setenv("AP_PORT", "http")
    code, _, err = run(capsys, "migrate")
    assert code == 2 and "AP_LOG_FORMAT" in err and "AP_PORT" in err


def test_token_refuses_when_an_identity_provider_is_configured(monkeypatch, capsys):
    monkeypatch.setenv("AP_AUTH_JWKS_URL", "https://idp.example/jwks.json")
    monkeypatch.setenv("AP_AUTH_ISSUER", "https://idp.example")
    code, _, err = run(capsys, "token", "--org", "o", "--user", "u")
    assert code == 2 and "identity provider" in err


def test_migrate_command(cli_env, capsys, owner_engine):
    code, out, _ = run(capsys, "migrate")
    assert code == 0 and "up to date" in out


def test_add_file_follows_a_folder_to_the_end(cli_env, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("AP_WORKER_IN_PROCESS", "true")
    code, out, _ = run(capsys, "kb", "create", "--org", "org_cli", "--name", "Folder")
    kb_id = str(json.loads(out)["id"])
    folder = tmp_path / "docs"
    (folder / "nested").mkdir(parents=True)
    (folder / "guide.md").write_text("# Guide\n\nRead the manual before calling support.\n")
    (folder / "nested" / "notes.txt").write_text("Support answers within one day.\n")
    (folder / "empty.txt").write_text("")
    code, _, err = run(capsys, "kb", "add-file", str(folder), "--kb", kb_id, "--org", "org_cli")
    assert code == 1, err
    for name in ("guide.md", "notes.txt", "empty.txt"):
        assert name in err
    assert err.count("completed") == 2 and "parse_failed" in err and "3/3" in err
