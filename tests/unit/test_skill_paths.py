"""Skill rules outside the YAML: bundled file paths, content types, where the front matter
sits in SKILL.md, and the folder a skill came in."""

from __future__ import annotations

import pytest

from domain.errors import Invalid
from domain.skills import (
    SkillManifest,
    check_folder_matches,
    check_skill_path,
    guess_content_type,
    is_skill_md,
    split_front_matter,
)


@pytest.mark.parametrize(
    "path",
    [
        "SKILL.md",
        "scripts/run.sh",
        "references/API_v2.md",
        "assets/a-b_c.d/e.txt",
        ".hidden",
        "a..b",
        "x" * 255,
    ],
)
def test_valid_paths_come_back_unchanged(path):
    assert check_skill_path(path) == path


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("", "empty"),
        ("x" * 256, "255"),
        ("../secret.txt", "'..'"),
        ("scripts/../../etc/passwd", "'..'"),
        ("./run.sh", "'.'"),
        ("scripts/.", "'.'"),
        ("/etc/passwd", "relative"),
        ("scripts\\run.sh", "backslash"),
        ("..\\evil", "backslash"),
        ("C:/Windows/evil.dll", "letters, digits"),
        ("scripts//run.sh", "empty segment"),
        ("scripts/", "empty segment"),
        ("my file.txt", "letters, digits"),
        ("résumé.md", "letters, digits"),
        ("a\x00b", "letters, digits"),
        ("line\nbreak", "letters, digits"),
    ],
)
def test_invalid_paths_are_refused_naming_the_path(path, rule):
    with pytest.raises(Invalid) as caught:
        check_skill_path(path)
    assert caught.value.message == "Invalid file path"
    [detail] = caught.value.details
    assert detail["field"] == "path"
    assert rule in str(detail["message"])


@pytest.mark.parametrize("path", [None, 3, b"SKILL.md", ["a"]])
def test_a_path_that_is_not_a_string_is_refused(path):
    with pytest.raises(Invalid) as caught:
        check_skill_path(path)
    assert caught.value.details == [{"field": "path", "message": "must be a string"}]


def test_only_the_root_skill_md_is_the_skill_file():
    assert is_skill_md("SKILL.md")
    assert not is_skill_md("skill.md")
    assert not is_skill_md("docs/SKILL.md")
    assert not is_skill_md("SKILL.md/")


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("README.md", "text/markdown"),
        ("scripts/run.py", "text/x-python"),
        ("scripts/run.sh", "text/x-shellscript"),
        ("notes.TXT", "text/plain"),
        ("data/schema.json", "application/json"),
        ("config.yaml", "application/yaml"),
        ("config.yml", "application/yaml"),
        ("assets/logo.png", "image/png"),
        ("assets/doc.pdf", "application/pdf"),
        ("assets/blob.unknownext", "application/octet-stream"),
        ("Makefile", "application/octet-stream"),
        (".md", "application/octet-stream"),
    ],
)
def test_content_types_are_guessed_from_the_name(path, content_type):
    assert guess_content_type(path) == content_type


def test_front_matter_is_split_from_the_body():
    yaml_text, body = split_front_matter("---\nname: a\ndescription: b\n---\n# Title\n\nText\n")
    assert yaml_text == "name: a\ndescription: b"
    assert body == "# Title\n\nText\n"


def test_front_matter_allows_a_bom_crlf_and_trailing_spaces_on_the_fences():
    yaml_text, body = split_front_matter("\ufeff---  \r\nname: a\r\n--- \r\nBody\r\n")
    assert yaml_text == "name: a\r"
    assert body == "Body\r\n"


def test_empty_front_matter_and_body():
    assert split_front_matter("---\n---") == ("", "")


def test_a_fence_inside_the_body_stays_in_the_body():
    _, body = split_front_matter("---\nname: a\n---\nabove\n---\nbelow")
    assert body == "above\n---\nbelow"


@pytest.mark.parametrize(
    ("skill_md", "rule"),
    [
        ("", "must start with a '---' line"),
        ("# Just Markdown\n", "must start with a '---' line"),
        ("\n---\nname: a\n---\n", "must start with a '---' line"),
        ("----\nname: a\n----\n", "must start with a '---' line"),
        ("--- name: a\n---\n", "must start with a '---' line"),
        ("---\nname: a\ndescription: b\n", "not closed"),
        ("---", "not closed"),
        ("---\nname: a\n--- x\n", "not closed"),
    ],
)
def test_missing_or_unclosed_front_matter_is_refused(skill_md, rule):
    with pytest.raises(Invalid) as caught:
        split_front_matter(skill_md)
    assert caught.value.message == "Invalid SKILL.md"
    [detail] = caught.value.details
    assert detail["field"] == "skillMd"
    assert rule in str(detail["message"])


def test_the_folder_must_be_named_as_the_skill():
    manifest = SkillManifest(name="pdf-tools", description="Reads PDFs.")
    check_folder_matches(manifest, None)
    check_folder_matches(manifest, "pdf-tools")
    with pytest.raises(Invalid) as caught:
        check_folder_matches(manifest, "pdf")
    [detail] = caught.value.details
    assert detail["field"] == "name"
    assert "'pdf'" in str(detail["message"])
