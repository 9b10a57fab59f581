"""SKILL.md front matter: the YAML parser's refusals and the Agent Skills manifest rules."""

from __future__ import annotations

import time

import pytest

from adapters.skills.front_matter import MAX_DEPTH, YamlFrontMatterParser
from domain.errors import Invalid
from domain.skills import SkillManifest, manifest_from_front_matter

parser = YamlFrontMatterParser()


def skill_md(front_matter: str, body: str = "# Instructions\n") -> str:
    return f"---\n{front_matter}---\n{body}"


def refusal(text: str) -> Invalid:
    with pytest.raises(Invalid) as caught:
        parser.parse(text)
    return caught.value


def fields(text: str) -> dict[str, str]:
    error = refusal(text)
    assert error.message == "Invalid SKILL.md"
    return {str(d["field"]): str(d["message"]) for d in error.details}


def yaml_reason(text: str) -> str:
    found = fields(text)
    assert list(found) == ["skillMd"]
    return found["skillMd"]


def test_a_full_manifest_is_read():
    manifest = parser.parse(
        skill_md(
            "name: pdf-tools\n"
            "description: >\n  Extracts text from PDFs.\n  Use for PDF files.\n"
            "license: Apache-2.0\n"
            "compatibility: Needs Python 3 and network access\n"
            "metadata:\n  author: example-org\n  version: '1.0'\n"
            "allowed-tools: Bash(git:*) Read\n"
            "x-unknown: [kept, in, SKILL.md, only]\n"
        )
    )
    assert manifest == SkillManifest(
        name="pdf-tools",
        description="Extracts text from PDFs. Use for PDF files.",
        license="Apache-2.0",
        compatibility="Needs Python 3 and network access",
        metadata={"author": "example-org", "version": "1.0"},
        allowed_tools="Bash(git:*) Read",
    )


def test_a_minimal_manifest_has_empty_optionals():
    manifest = parser.parse(skill_md("name: a\ndescription: '  Does a.  '\n"))
    assert manifest == SkillManifest(name="a", description="Does a.")
    assert manifest.metadata == {}


def test_bom_and_crlf_skill_md_is_read():
    manifest = parser.parse("\ufeff---\r\nname: a\r\ndescription: d\r\n---\r\nBody\r\n")
    assert (manifest.name, manifest.description) == ("a", "d")


@pytest.mark.parametrize("name", ["a", "pdf", "pdf-tools", "a1-b2-c3", "0", "x" * 64])
def test_valid_names(name):
    assert parser.parse(skill_md(f"name: '{name}'\ndescription: d\n")).name == name


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("''", "must not be empty"),
        ("x" * 65, "at most 64"),
        ("PDF-Tools", "lower-case letters"),
        ("pdf_tools", "lower-case letters"),
        ("'pdf tools'", "lower-case letters"),
        ("'pdf.tools'", "lower-case letters"),
        ("résumé", "lower-case letters"),
        ("-pdf", "start or end with a hyphen"),
        ("pdf-", "start or end with a hyphen"),
        ("'-'", "start or end with a hyphen"),
        ("pdf--tools", "consecutive hyphens"),
        ("123", "must be a string"),
        ("2024-01-01", "must be a string"),
        ("true", "must be a string"),
        ("[a, b]", "must be a string"),
        ("{a: b}", "must be a string"),
        ("null", "is required"),
        ("", "is required"),
    ],
)
def test_each_broken_name_rule_is_named(name, rule):
    found = fields(skill_md(f"name: {name}\ndescription: d\n"))
    assert list(found) == ["name"]
    assert rule in found["name"]


def test_name_and_description_are_required():
    found = fields(skill_md("license: MIT\n"))
    assert found == {"name": "is required", "description": "is required"}


def test_description_of_1024_characters_after_trimming_is_accepted():
    description = "d" * 1024
    manifest = parser.parse(skill_md(f"name: a\ndescription: '   {description}   '\n"))
    assert manifest.description == description


@pytest.mark.parametrize(
    ("description", "rule"),
    [
        ("d" * 1025, "at most 1024"),
        ("''", "must not be empty"),
        ("'   '", "must not be empty"),
        ("", "is required"),
        ("42", "must be a string"),
        ("[a]", "must be a string"),
        ('"a\\0b"', "NUL"),
    ],
)
def test_broken_descriptions_are_named(description, rule):
    found = fields(skill_md(f"name: a\ndescription: {description}\n"))
    assert list(found) == ["description"]
    assert rule in found["description"]


def test_an_escaped_lone_surrogate_is_refused():
    found = fields(skill_md('name: a\ndescription: "a\\ud800b"\n'))
    # libyaml refuses the escape itself; the pure-Python parser yields it and the rule refuses it
    assert list(found) in (["skillMd"], ["description"])


@pytest.mark.parametrize(
    ("line", "field", "rule"),
    [
        ("license: 2", "license", "must be a string"),
        ("license:", "license", "must be a string"),
        ('license: "\\0"', "license", "NUL"),
        ("compatibility: ''", "compatibility", "must not be empty"),
        ("compatibility: " + "c" * 501, "compatibility", "at most 500"),
        ("compatibility: [py3]", "compatibility", "must be a string"),
        ("metadata: [a, b]", "metadata", "map of string keys"),
        ("metadata: text", "metadata", "map of string keys"),
        ("metadata: {version: 1.0}", "metadata", "value of 'version' must be a string"),
        ("metadata: {1: one}", "metadata", "key 1 must be a string"),
        ("metadata: {a: {b: c}}", "metadata", "value of 'a' must be a string"),
        ('metadata: {a: "\\0"}', "metadata", "NUL"),
        ("allowed-tools: [Read, Bash]", "allowed-tools", "must be a string"),
    ],
)
def test_broken_optional_fields_are_named(line, field, rule):
    found = fields(skill_md(f"name: a\ndescription: d\n{line}\n"))
    assert list(found) == [field]
    assert rule in found[field]


def test_optional_fields_at_their_limits_are_accepted():
    manifest = parser.parse(
        skill_md("name: a\ndescription: d\ncompatibility: " + "c" * 500 + "\nmetadata: {}\n")
    )
    assert manifest.compatibility == "c" * 500


def test_every_breach_is_collected_one_entry_per_field():
    found = fields(
        skill_md(
            "name: Bad_Name\ndescription: ''\nlicense: 3\ncompatibility: ''\n"
            "metadata: {v: 1}\nallowed-tools: 4\n"
        )
    )
    assert set(found) == {
        "name",
        "description",
        "license",
        "compatibility",
        "metadata",
        "allowed-tools",
    }


@pytest.mark.parametrize("data", [None, [], "text", 3, ["name", "a"]])
def test_front_matter_must_be_a_mapping(data):
    with pytest.raises(Invalid) as caught:
        manifest_from_front_matter(data)
    [detail] = caught.value.details
    assert detail["field"] == "skillMd"
    assert "mapping" in str(detail["message"])


def test_empty_front_matter_is_not_a_mapping():
    assert "mapping" in yaml_reason("---\n---\nBody\n")


def test_missing_front_matter_is_refused():
    assert "'---'" in yaml_reason("# A skill without front matter\n")


def test_unclosed_front_matter_is_refused():
    assert "not closed" in yaml_reason("---\nname: a\ndescription: d\n")


@pytest.mark.parametrize(
    "front_matter",
    [
        "name: a\ndescription: [unclosed\n",
        "name: a\n  description: d\n",
        "name: 'a\ndescription: d\n",
        "name: a\tdescription: {\n",
        "- a\n- b: c: d\n",
    ],
)
def test_yaml_that_does_not_parse_is_refused_with_a_short_reason(front_matter):
    reason = yaml_reason(skill_md(front_matter))
    assert reason.startswith("front matter is not valid YAML")
    assert "Error" not in reason
    assert "Traceback" not in reason


def test_the_reason_gives_the_line_in_skill_md():
    reason = yaml_reason(skill_md("name: a\ndescription: d\nbad: [\n"))
    assert "(line " in reason


def test_a_character_yaml_refuses_is_named_without_internals():
    assert yaml_reason(skill_md("name: a\x01\ndescription: d\n")) == (
        "front matter holds a character YAML does not allow"
    )


@pytest.mark.parametrize("body", ["x\x00y", "x\ud800y"])
def test_unstorable_text_anywhere_in_skill_md_is_refused(body):
    error = refusal(skill_md("name: a\ndescription: d\n", body=body))
    [detail] = error.details
    assert detail["field"] == "skillMd"


def test_duplicate_top_level_keys_are_refused():
    reason = yaml_reason(skill_md("name: a\ndescription: d\nname: b\n"))
    assert "duplicate key 'name'" in reason
    assert "(line 4)" in reason


def test_duplicate_nested_keys_are_refused():
    reason = yaml_reason(skill_md("name: a\ndescription: d\nmetadata:\n  k: v\n  k: w\n"))
    assert "duplicate key 'k'" in reason


def test_deeply_nested_duplicate_keys_are_refused():
    text = skill_md("name: a\ndescription: d\nx-other:\n  - {a: {b: 1, b: 2}}\n")
    assert "duplicate key 'b'" in yaml_reason(text)


def test_keys_equal_once_read_are_duplicates():
    text = skill_md("name: a\ndescription: d\n'name': b\n")
    assert "duplicate key 'name'" in yaml_reason(text)
    text = skill_md("name: a\ndescription: d\nx-other: {1: a, 0x1: b}\n")
    assert "duplicate key 1" in yaml_reason(text)


def test_a_billion_laughs_is_refused_before_any_expansion():
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 10):
        prev = f"*a{level - 1}"
        lines.append(f"a{level}: &a{level} [{', '.join([prev] * 9)}]")
    bomb = skill_md("name: a\ndescription: d\n" + "\n".join(lines) + "\n")
    started = time.monotonic()
    assert "aliases are not allowed" in yaml_reason(bomb)
    assert time.monotonic() - started < 5  # expanding it would take hours; CI's load needs room


def test_a_single_alias_is_refused():
    assert "aliases are not allowed" in yaml_reason(skill_md("name: &n a\ndescription: *n\n"))


def test_merge_keys_are_refused():
    text = skill_md("name: a\ndescription: d\nmetadata:\n  <<: {k: v}\n  j: w\n")
    assert "merge keys" in yaml_reason(text)


def test_deep_nesting_is_refused_without_exhausting_the_stack():
    # Flow nesting: libyaml's scanner, when PyYAML bundles one that limits depth, refuses it
    # before the composer does; the reason is the same either way.
    text = skill_md("name: a\ndescription: d\nx: " + "[" * 30000 + "\n")
    assert (
        yaml_reason(text) == "front matter is not valid YAML: values are nested too deeply (line 4)"
    )


def test_deep_block_nesting_is_refused_by_the_composer():
    lines = [f"{'  ' * level}k{level}:" for level in range(MAX_DEPTH + 2)]
    text = skill_md(
        "name: a\ndescription: d\nx:\n" + "\n".join("  " + line for line in lines) + " v\n"
    )
    assert yaml_reason(text).startswith(
        "front matter is not valid YAML: values are nested too deeply"
    )
    shallow = [f"{'  ' * level}k{level}:" for level in range(MAX_DEPTH - 3)]
    text = skill_md(
        "name: a\ndescription: d\nx:\n" + "\n".join("  " + line for line in shallow) + " v\n"
    )
    assert YamlFrontMatterParser().parse(text).name == "a"


def test_front_matter_past_the_size_limit_is_refused():
    small = YamlFrontMatterParser(max_front_matter_bytes=100)
    with pytest.raises(Invalid) as caught:
        small.parse(skill_md("name: a\ndescription: " + "d" * 200 + "\n", body="b" * 10_000))
    assert "larger than 100 bytes" in str(caught.value.details[0]["message"])
    assert small.parse(skill_md("name: a\ndescription: d\n", body="b" * 10_000)).name == "a"


def test_the_default_size_limit_is_64_kib():
    padding = "x-pad: " + "p" * (64 * 1024) + "\n"
    assert "larger than 65536 bytes" in yaml_reason(skill_md("name: a\ndescription: d\n" + padding))
