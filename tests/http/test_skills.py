"""`/skills/manage`, `/skills/files` and `/skills/import` against real Postgres and storage
(local disk here; `test_skill_files_s3` runs the file flow on the S3 server)."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile

import pytest
from sqlalchemy import text

SKILL_MD_ELSEWHERE = "SKILL.md cannot be changed here; replace it with PUT /skills/manage"


def skill_md(name="pdf-tools", description="Extract text and tables from PDF files.", extra=""):
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n# PDF tools\n\nRun it.\n"


async def create(client, who, md=None):
    response = await client.post(
        "/skills/manage", json={"skillMd": md or skill_md()}, headers=who.headers
    )
    assert response.status_code == 201, response.text
    return response.json()["skill"]


async def put_file(client, who, skill_id, path, data, **extra):
    body = {"skillId": skill_id, "path": path, "content": base64.b64encode(data).decode()}
    return await client.post("/skills/files", json={**body, **extra}, headers=who.headers)


def a_zip(entries, *, links=()):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
        for name in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777 << 16) | 0
            archive.writestr(info, "../../etc/passwd")
    return buffer.getvalue()


def stored(settings) -> set[str]:
    """Every object stored under the skills of org_a (earlier tests leave theirs behind)."""
    root = settings.data_dir.resolve() / "objects" / "orgs/org_a/skills"
    return {str(p) for p in root.rglob("*")} if root.exists() else set()


async def import_zip(client, who, data, content_type="application/zip"):
    return await client.post(
        "/skills/import", content=data, headers={**who.headers, "Content-Type": content_type}
    )


async def test_create_read_and_list(client, alice, member):
    md = skill_md(extra="license: MIT\ncompatibility: Python 3.11\nmetadata:\n  owner: ops\n")
    skill = await create(client, alice, md)
    assert skill["name"] == "pdf-tools"
    assert skill["description"] == "Extract text and tables from PDF files."
    assert (skill["license"], skill["compatibility"], skill["metadata"]) == (
        "MIT",
        "Python 3.11",
        {"owner": "ops"},
    )
    assert (skill["version"], skill["fileCount"], skill["userId"]) == (1, 1, "user_alice")
    assert skill["skillMd"] == md and skill["allowedTools"] is None
    assert skill["files"] == [
        {
            "path": "SKILL.md",
            "size": len(md.encode()),
            "contentType": "text/markdown",
            "sha256": hashlib.sha256(md.encode()).hexdigest(),
            "updatedAt": skill["files"][0]["updatedAt"],
        }
    ]
    await create(client, alice, skill_md(name="alpha"))
    # Any member of the organization may read and manage skills.
    carol = member("org_a", "user_carol", "member")
    listed = await client.get("/skills/manage", headers=carol.headers)
    assert listed.status_code == 200
    assert [s["name"] for s in listed.json()["skills"]] == ["alpha", "pdf-tools"]
    assert "skillMd" not in listed.json()["skills"][0]
    one = await client.get(f"/skills/manage?skillId={skill['id']}", headers=carol.headers)
    assert one.json() == {"success": True, "skill": skill}


@pytest.mark.parametrize(
    ("md", "field"),
    [
        ("# no front matter\n", "skillMd"),
        ("---\nname: [unclosed\n---\n", "skillMd"),
        ("---\nname: a\nname: b\ndescription: d\n---\n", "skillMd"),
        (skill_md(name="PDF-tools"), "name"),
        (skill_md(name="-pdf"), "name"),
        (skill_md(name="pdf-"), "name"),
        (skill_md(name="pdf--tools"), "name"),
        (skill_md(name="a" * 65), "name"),
        (skill_md(description="''"), "description"),
        (skill_md(description="x" * 1025), "description"),
        (skill_md(extra="compatibility: " + "c" * 501 + "\n"), "compatibility"),
        (skill_md(extra="metadata:\n  version: 1.0\n"), "metadata"),
    ],
)
async def test_bad_skill_md_is_400_naming_the_field_and_stores_nothing(client, alice, md, field):
    response = await client.post("/skills/manage", json={"skillMd": md}, headers=alice.headers)
    assert response.status_code == 400, response.text
    assert field in [d["field"] for d in response.json()["details"]]
    listed = await client.get("/skills/manage", headers=alice.headers)
    assert listed.json()["skills"] == []


async def test_missing_skill_md_and_bad_ids(client, alice):
    missing = await client.post("/skills/manage", json={}, headers=alice.headers)
    assert (missing.status_code, missing.json()["error"]) == (400, "skillMd is required")
    for bad in ("abc", "0", "-1", "1.5", "99999999999999999999"):
        response = await client.get(f"/skills/manage?skillId={bad}", headers=alice.headers)
        assert (response.status_code, response.json()) == (
            400,
            {"error": "Valid skill ID is required"},
        ), bad
    put = await client.put(
        "/skills/manage", json={"skillId": "seven", "skillMd": skill_md()}, headers=alice.headers
    )
    assert (put.status_code, put.json()["error"]) == (400, "Valid skill ID is required")


async def test_names_are_unique_among_active_skills(client, alice, bob):
    first = await create(client, alice)
    clash = await client.post("/skills/manage", json={"skillMd": skill_md()}, headers=alice.headers)
    assert (clash.status_code, clash.json()) == (
        409,
        {"error": "A skill with this name already exists"},
    )
    await create(client, bob)  # another organization's names are its own
    deleted = await client.delete(f"/skills/manage?skillId={first['id']}", headers=alice.headers)
    assert deleted.json() == {"success": True, "message": "Skill deleted"}
    again = await create(client, alice)
    assert again["id"] != first["id"] and again["version"] == 1


async def test_replace_skill_md_with_versions(client, alice):
    skill = await create(client, alice)
    path = "/skills/manage"
    new_md = skill_md(description="Read PDFs.")
    changed = await client.put(
        path,
        json={"skillId": skill["id"], "skillMd": new_md, "expectedVersion": 1},
        headers=alice.headers,
    )
    assert changed.status_code == 200, changed.text
    assert (changed.json()["skill"]["version"], changed.json()["skill"]["description"]) == (
        2,
        "Read PDFs.",
    )
    stale = await client.put(
        path,
        json={"skillId": skill["id"], "skillMd": skill_md(), "expectedVersion": 1},
        headers=alice.headers,
    )
    assert (stale.status_code, stale.json()) == (
        409,
        {"error": "Skill was changed by someone else"},
    )
    same = await client.put(
        path, json={"skillId": skill["id"], "skillMd": new_md}, headers=alice.headers
    )
    assert same.json()["skill"]["version"] == 2  # the same SKILL.md is no change
    await create(client, alice, skill_md(name="other"))
    rename = await client.put(
        path,
        json={"skillId": skill["id"], "skillMd": skill_md(name="other")},
        headers=alice.headers,
    )
    assert rename.status_code == 409
    read = await client.get(f"{path}?skillId={skill['id']}", headers=alice.headers)
    assert read.json()["skill"]["skillMd"] == new_md
    bad = await client.put(
        path,
        json={"skillId": skill["id"], "skillMd": new_md, "expectedVersion": 0},
        headers=alice.headers,
    )
    assert (bad.status_code, bad.json()["error"]) == (
        400,
        "expectedVersion must be a positive integer",
    )


async def test_bundled_files(client, alice, settings):
    skill = await create(client, alice)
    sid = skill["id"]
    added = await put_file(client, alice, sid, "scripts/extract.py", b"print('hi')\n")
    assert added.status_code == 201, added.text
    assert added.json()["file"]["contentType"] == "text/x-python"
    assert added.json()["file"]["sha256"] == hashlib.sha256(b"print('hi')\n").hexdigest()
    view = (await client.get(f"/skills/manage?skillId={sid}", headers=alice.headers)).json()
    assert view["skill"]["version"] == 2 and view["skill"]["fileCount"] == 2
    assert [f["path"] for f in view["skill"]["files"]] == ["SKILL.md", "scripts/extract.py"]
    read = await client.get(
        f"/skills/files?skillId={sid}&path=scripts/extract.py", headers=alice.headers
    )
    assert read.status_code == 200 and read.content == b"print('hi')\n"
    assert read.headers["content-type"].startswith("text/x-python")
    assert read.headers["content-disposition"].startswith("attachment")
    assert read.headers["x-content-type-options"] == "nosniff"
    skill_md_read = await client.get(
        f"/skills/files?skillId={sid}&path=SKILL.md", headers=alice.headers
    )
    assert skill_md_read.content == skill_md().encode()
    replaced = await put_file(
        client, alice, sid, "scripts/extract.py", b"print('bye')\n", contentType="text/plain"
    )
    assert replaced.status_code == 201 and replaced.json()["file"]["contentType"] == "text/plain"
    read = await client.get(
        f"/skills/files?skillId={sid}&path=scripts/extract.py", headers=alice.headers
    )
    assert read.content == b"print('bye')\n"
    # The replacement went to a key of its own; the replaced object was deleted after the commit.
    folder = settings.data_dir.resolve() / "objects" / f"orgs/org_a/skills/{sid}"

    def stored() -> list[bytes]:
        """This skill's scripts stored (another test's skill of the same id may have left
        objects in the folder: only ours count)."""
        files = [p for p in folder.rglob("*") if p.is_file() and p.name[0] != "."]
        return [b for b in (p.read_bytes() for p in files) if b.startswith(b"print(")]

    assert stored() == [b"print('bye')\n"]
    unchanged = await put_file(
        client, alice, sid, "scripts/extract.py", b"print('bye')\n", contentType="text/plain"
    )
    assert unchanged.status_code == 201
    view = (await client.get(f"/skills/manage?skillId={sid}", headers=alice.headers)).json()
    assert view["skill"]["version"] == 3
    gone = await client.delete(
        f"/skills/files?skillId={sid}&path=scripts/extract.py", headers=alice.headers
    )
    assert gone.json() == {"success": True, "message": "File deleted"}
    assert stored() == []
    again = await client.delete(
        f"/skills/files?skillId={sid}&path=scripts/extract.py", headers=alice.headers
    )
    assert (again.status_code, again.json()) == (404, {"error": "File not found"})
    view = (await client.get(f"/skills/manage?skillId={sid}", headers=alice.headers)).json()
    assert (view["skill"]["version"], view["skill"]["fileCount"]) == (4, 1)


@pytest.mark.parametrize(
    "path", ["../x", "a/../b", "./a", "/abs", "a\\b", "a//b", "a/", "sp ace", "é.md", "a" * 256]
)
async def test_bad_paths_are_400(client, alice, path):
    skill = await create(client, alice)
    response = await put_file(client, alice, skill["id"], path, b"x")
    assert (response.status_code, response.json()["error"]) == (400, "Invalid file path")
    read = await client.get(
        "/skills/files", params={"skillId": skill["id"], "path": path}, headers=alice.headers
    )
    assert (read.status_code, read.json()["error"]) == (400, "Invalid file path")


async def test_skill_md_is_not_a_bundled_file(client, alice):
    skill = await create(client, alice)
    added = await put_file(client, alice, skill["id"], "SKILL.md", b"---\n")
    assert (added.status_code, added.json()["error"]) == (400, SKILL_MD_ELSEWHERE)
    removed = await client.delete(
        f"/skills/files?skillId={skill['id']}&path=SKILL.md", headers=alice.headers
    )
    assert (removed.status_code, removed.json()["error"]) == (400, SKILL_MD_ELSEWHERE)


async def test_bad_content_and_limits(client, alice):
    skill = await create(client, alice)
    body = {"skillId": skill["id"], "path": "a.txt", "content": "not base64!"}
    bad = await client.post("/skills/files", json=body, headers=alice.headers)
    assert (bad.status_code, bad.json()["error"]) == (400, "content must be base64-encoded bytes")
    too_big = await put_file(client, alice, skill["id"], "big.bin", b"x" * 2049)
    assert too_big.status_code == 413, too_big.text
    for n in range(3):
        assert (await put_file(client, alice, skill["id"], f"f{n}.txt", b"1")).status_code == 201
    too_many = await put_file(client, alice, skill["id"], "f3.txt", b"1")
    assert too_many.status_code == 413 and "at most 4 files" in too_many.json()["error"]


async def test_soft_delete(client, alice, bob, settings, owner_engine):
    skill = await create(client, alice)
    sid = skill["id"]
    assert (await put_file(client, alice, sid, "notes.md", b"# notes")).status_code == 201
    agent = await client.post(
        "/agents", json={"name": "Helper", "skillIds": [sid]}, headers=alice.headers
    )
    assert agent.status_code == 201 and agent.json()["agent"]["skillIds"] == [sid]
    foreign = await client.delete(f"/skills/manage?skillId={sid}", headers=bob.headers)
    assert (foreign.status_code, foreign.json()) == (404, {"error": "Skill not found"})
    deleted = await client.delete(f"/skills/manage?skillId={sid}", headers=alice.headers)
    assert deleted.status_code == 200
    for response in (
        await client.get(f"/skills/manage?skillId={sid}", headers=alice.headers),
        await client.put(
            "/skills/manage", json={"skillId": sid, "skillMd": skill_md()}, headers=alice.headers
        ),
        await client.delete(f"/skills/manage?skillId={sid}", headers=alice.headers),
        await client.get(f"/skills/files?skillId={sid}&path=notes.md", headers=alice.headers),
        await put_file(client, alice, sid, "more.md", b"x"),
        await client.delete(f"/skills/files?skillId={sid}&path=notes.md", headers=alice.headers),
    ):
        assert (response.status_code, response.json()) == (404, {"error": "Skill not found"})
    assert (await client.get("/skills/manage", headers=alice.headers)).json()["skills"] == []
    # The bundled files stay in storage, and recorded.
    async with owner_engine.connect() as connection:
        keys = (await connection.scalars(text("SELECT storage_key FROM skill_files"))).all()
    assert len(keys) == 1
    stored = settings.data_dir.resolve() / "objects" / keys[0]
    assert stored.read_bytes() == b"# notes"
    # The agent keeps working and no longer lists the skill.
    kept = await client.get(f"/agents?agentId={agent.json()['agent']['id']}", headers=alice.headers)
    assert kept.status_code == 200 and kept.json()["agent"]["skillIds"] == []
    log = (await client.get("/admin/audit-log", headers=alice.headers)).json()["entries"]
    assert [(e["action"], e["targetId"], e["details"]["name"]) for e in log] == [
        ("skill.deleted", str(sid), "pdf-tools")
    ]


async def test_an_agent_names_only_skills_of_its_organization(client, alice, bob):
    theirs = await create(client, bob)
    response = await client.post(
        "/agents", json={"name": "Helper", "skillIds": [theirs["id"]]}, headers=alice.headers
    )
    assert (response.status_code, response.json()["error"]) == (
        400,
        f"Unknown skill ids: {theirs['id']}",
    )


async def test_import_a_zip(client, alice):
    md = skill_md()
    data = a_zip(
        {
            "pdf-tools/SKILL.md": md,
            "pdf-tools/scripts/extract.py": "print('x')\n",
            "pdf-tools/references/REFERENCE.md": "# Reference\n",
            "__MACOSX/pdf-tools/._SKILL.md": "junk",
        }
    )
    response = await import_zip(client, alice, data)
    assert response.status_code == 201, response.text
    skill = response.json()["skill"]
    assert (skill["name"], skill["version"], skill["fileCount"]) == ("pdf-tools", 1, 3)
    assert [f["path"] for f in skill["files"]] == [
        "SKILL.md",
        "references/REFERENCE.md",
        "scripts/extract.py",
    ]
    read = await client.get(
        f"/skills/files?skillId={skill['id']}&path=references/REFERENCE.md", headers=alice.headers
    )
    assert read.content == b"# Reference\n"
    at_root = await import_zip(client, alice, a_zip({"SKILL.md": skill_md(name="root-skill")}))
    assert at_root.status_code == 201 and at_root.json()["skill"]["fileCount"] == 1


@pytest.mark.parametrize(
    ("entries", "links", "fragment"),
    [
        ({"other/SKILL.md": skill_md()}, (), "name"),
        ({"SKILL.md": skill_md(), "../evil.txt": "x"}, (), "archive"),
        ({"SKILL.md": skill_md(), "a\\b.txt": "x"}, (), "archive"),
        ({"SKILL.md": skill_md()}, ("link.txt",), "archive"),
        ({"README.md": "no skill"}, (), "archive"),
        ({"SKILL.md": skill_md(), **{f"f{n}.txt": "x" for n in range(4)}}, (), "archive"),
        ({"SKILL.md": skill_md(), "big.bin": "x" * 2049}, (), "archive"),
        ({"SKILL.md": "no front matter"}, (), "skillMd"),
    ],
)
async def test_bad_archives_are_400_and_store_nothing(
    client, alice, settings, entries, links, fragment
):
    before = stored(settings)
    response = await import_zip(client, alice, a_zip(entries, links=links))
    assert response.status_code == 400, response.text
    assert fragment in [d["field"] for d in response.json().get("details", [])]
    assert (await client.get("/skills/manage", headers=alice.headers)).json()["skills"] == []
    assert stored(settings) == before


async def test_import_refuses_what_is_not_a_zip(client, alice, settings):
    not_zip = await import_zip(client, alice, b"PK\x03\x04 truncated")
    assert not_zip.status_code == 400
    wrong_type = await import_zip(client, alice, a_zip({"SKILL.md": skill_md()}), "text/plain")
    assert wrong_type.status_code == 415
    oversize = await import_zip(client, alice, b"x" * 8193)
    assert oversize.status_code == 413
    await create(client, alice)
    before = stored(settings)
    clash = await import_zip(client, alice, a_zip({"SKILL.md": skill_md(), "a.txt": "x"}))
    assert clash.status_code == 409
    assert stored(settings) == before
