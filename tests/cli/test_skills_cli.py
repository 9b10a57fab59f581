"""`agent-platform skills import` and `skills list`, run in process against the test database
and local-disk storage."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from entrypoints.cli import main
from tests.cli.conftest import run


def skill_md(name: str, description: str = "Extract text and tables from PDF files.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nRun it.\n"


def skill_folder(parent: Path, name: str, md: str | None = None) -> Path:
    folder = parent / name
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(md or skill_md(name))
    (folder / "scripts" / "extract.py").write_text("print('text')\n")
    return folder


def listed(capsys, org: str = "org_s") -> list[dict]:
    code, out, _ = run(capsys, "skills", "list", "--org", org, "--json")
    assert code == 0
    return json.loads(out)


def stored(data_dir: Path, org: str = "org_s") -> set[str]:
    """The skills' stored objects (local disk keeps each one's content type beside it, in a
    hidden file)."""
    root = data_dir / "objects" / "orgs" / org / "skills"
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }


def test_import_a_folder_leaves_hidden_files_out(cli_env, capsys, tmp_path):
    folder = skill_folder(tmp_path, "pdf-tools")
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("[core]\n")
    (folder / ".DS_Store").write_bytes(b"\x00\x01")
    (folder / "scripts" / ".cache").write_text("x")

    code, out, err = run(capsys, "skills", "import", str(folder), "--org", "org_s")
    assert code == 0, err
    assert out == ""
    assert "[1/1] imported pdf-tools (id 1): version 1, 2 files" in err
    assert "imported 1, failed 0" in err

    (skill,) = listed(capsys)
    assert (skill["name"], skill["version"], skill["fileCount"]) == ("pdf-tools", 1, 2)
    assert skill["userId"] == "cli"
    assert stored(cli_env) == {"1/files/scripts/extract.py"}


def test_import_a_zip_as_another_user(cli_env, capsys, tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("SKILL.md", skill_md("csv-tools", "Clean CSV files."))
        archive.writestr("reference/format.md", "# Format\n")
        archive.writestr("data/sample.csv", "a,b\n1,2\n")
    path = tmp_path / "csv-tools.zip"
    path.write_bytes(buffer.getvalue())

    code, _, err = run(
        capsys, "skills", "import", str(path), "--org", "org_s", "--user", "user_ops"
    )
    assert code == 0, err
    assert "imported csv-tools (id 1): version 1, 3 files" in err and str(path) in err
    (skill,) = listed(capsys)
    assert (skill["name"], skill["fileCount"], skill["userId"]) == ("csv-tools", 3, "user_ops")
    assert listed(capsys, "org_other") == []


def test_a_folder_of_skills_imports_each_and_one_failure_stops_none(cli_env, capsys, tmp_path):
    collection = tmp_path / "skills"
    skill_folder(collection, "a-broken", skill_md("Bad--Name"))
    skill_folder(collection, "b-renamed", skill_md("other-name"))
    skill_folder(collection, "pdf-tools")
    (collection / "README.md").write_text("# Our skills\n")
    (collection / "notes").mkdir()
    skill_folder(collection / ".trash", "old-skill")

    code, _, err = run(capsys, "skills", "import", str(collection), "--org", "org_s")
    assert code == 1
    lines = err.splitlines()
    assert lines[0] == f"[1/3] failed   {collection / 'a-broken'}: Invalid SKILL.md"
    assert lines[1].strip().startswith("name: may contain only lower-case letters")
    assert lines[2] == (
        f"[2/3] failed   {collection / 'b-renamed'}: Skill name does not match its folder"
    )
    assert "name: must equal the name of the skill's folder ('b-renamed')" in lines[3]
    assert lines[4].startswith("[3/3] imported pdf-tools (id ")
    assert lines[-1] == "imported 1, failed 2"
    assert [s["name"] for s in listed(capsys)] == ["pdf-tools"]


def test_a_name_clash_fails_that_skill_only(cli_env, capsys, tmp_path):
    first = skill_folder(tmp_path / "one", "pdf-tools")
    again = skill_folder(tmp_path / "two", "pdf-tools")
    other = skill_folder(tmp_path / "two", "csv-tools")
    code, _, err = run(capsys, "skills", "import", str(first), "--org", "org_s")
    assert code == 0, err

    code, _, err = run(capsys, "skills", "import", str(again), str(other), "--org", "org_s")
    assert code == 1
    assert f"failed   {again}: A skill with this name already exists" in err
    assert "imported csv-tools" in err and "imported 1, failed 1" in err
    skills = listed(capsys)
    assert [(s["name"], s["version"]) for s in skills] == [("csv-tools", 1), ("pdf-tools", 1)]


def test_a_symbolic_link_in_a_folder_is_refused(cli_env, capsys, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("password\n")
    folder = skill_folder(tmp_path, "pdf-tools")
    (folder / "scripts" / "secret.txt").symlink_to(secret)
    linked = skill_folder(tmp_path, "csv-tools")
    (linked / "more").symlink_to(tmp_path, target_is_directory=True)

    code, _, err = run(capsys, "skills", "import", str(folder), str(linked), "--org", "org_s")
    assert code == 1
    assert f"failed   {folder}: Invalid skill folder" in err
    assert "path: scripts/secret.txt is a symbolic link; a skill holds files only" in err
    assert "path: more is a symbolic link" in err
    assert "imported 0, failed 2" in err
    assert listed(capsys) == []
    assert stored(cli_env) == set()


def test_unreadable_input_is_a_failure_and_a_missing_path_a_usage_error(cli_env, capsys, tmp_path):
    not_zip = tmp_path / "notes.zip"
    not_zip.write_text("not a zip")
    code, _, err = run(capsys, "skills", "import", str(not_zip), "--org", "org_s")
    assert code == 1
    assert "Invalid skill archive" in err and "archive: is not a valid zip archive" in err

    good = skill_folder(tmp_path, "pdf-tools")
    code, _, err = run(
        capsys, "skills", "import", str(good), str(tmp_path / "missing"), "--org", "org_s"
    )
    assert code == 2 and "missing: no such file or folder" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run(capsys, "skills", "import", str(empty), "--org", "org_s")
    assert code == 2 and "no SKILL.md in this folder or in its folders" in err
    assert listed(capsys) == []

    with pytest.raises(SystemExit) as exit_:
        main(["skills", "import", "--org", "org_s"])
    assert exit_.value.code == 2


def test_list_prints_one_line_per_skill_and_json_records(cli_env, capsys, tmp_path):
    long = "Clean, merge and validate CSV files of any size;\n  keeps the header row intact."
    skill_folder(tmp_path / "s", "csv-tools", skill_md("csv-tools", long))
    skill_folder(tmp_path / "s", "pdf-tools")
    code, _, err = run(capsys, "skills", "import", str(tmp_path / "s"), "--org", "org_s")
    assert code == 0, err

    code, out, _ = run(capsys, "skills", "list", "--org", "org_s")
    assert code == 0
    csv_line, pdf_line = out.splitlines()
    fields = csv_line.split("\t")
    assert fields[1:4] == ["csv-tools", "v1", "2 files"]
    assert fields[4] == "Clean, merge and validate CSV files of any size; keeps the…"
    assert len(fields[4]) <= 60
    assert pdf_line.split("\t")[1:] == [
        "pdf-tools",
        "v1",
        "2 files",
        "Extract text and tables from PDF files.",
    ]

    records = listed(capsys)
    assert [r["id"] for r in records] == [int(line.split("\t")[0]) for line in (csv_line, pdf_line)]
    assert set(records[0]) == {
        "id",
        "name",
        "description",
        "license",
        "compatibility",
        "metadata",
        "allowedTools",
        "version",
        "fileCount",
        "createdAt",
        "updatedAt",
        "userId",
    }
    assert records[0]["description"] == " ".join(long.split())
    code, out, _ = run(capsys, "skills", "list", "--org", "org_empty")
    assert (code, out) == (0, "")


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "skills"


def test_the_example_skills_the_docs_use_import_whole(cli_env, capsys):
    """docs/api.md imports `examples/skills` and its folders: each is a valid skill, named as
    its folder, with every file bundled."""
    code, _, err = run(capsys, "skills", "import", str(EXAMPLES), "--org", "org_s")
    assert code == 0, err
    skills = {skill["name"]: skill for skill in listed(capsys)}
    assert set(skills) == {"expense-policy", "travel-booking"}
    for name, skill in skills.items():
        on_disk = [p for p in (EXAMPLES / name).rglob("*") if p.is_file()]
        assert skill["fileCount"] == len(on_disk)
        assert skill["description"] and skill["license"] == "CC0-1.0"
