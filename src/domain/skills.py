"""Agent Skills: the rules of a skill's SKILL.md front matter and of its bundled files' paths.

A skill is a folder holding `SKILL.md` (YAML front matter between `---` lines, then Markdown
instructions) and bundled files. Parsing the YAML itself is an adapter's job; this module
finds the front matter, checks the mapping it yields, and checks bundled file paths.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import mimetypes
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from domain.errors import Invalid, field_error
from domain.files import CONTENT_TYPE_INVALID, validate_content_type
from domain.ids import MAX_BIGINT, parse_positive_id
from domain.text import check_storable, required

SKILL_FILE = "SKILL.md"
INVALID_SKILL_MD = "Invalid SKILL.md"
INVALID_PATH = "Invalid file path"

NAME_MAX = 64
DESCRIPTION_MAX = 1024
COMPATIBILITY_MAX = 500
PATH_MAX = 255

_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_NAME_CHARS = re.compile(r"[a-z0-9-]*")
_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")
_FENCE = "---"
_BOM = "\ufeff"

_TEXT_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".py": "text/x-python",
    ".sh": "text/x-shellscript",
    ".bash": "text/x-shellscript",
    ".json": "application/json",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".csv": "text/csv",
    ".html": "text/html",
    ".js": "text/javascript",
    ".ts": "text/x-typescript",
    ".toml": "application/toml",
    ".xml": "application/xml",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillManifest:
    """What a skill's front matter declares, once checked."""

    name: str
    description: str
    license: str | None = None
    compatibility: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    allowed_tools: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BundledFile:
    """One file bundled with a skill, at a path relative to the skill's folder."""

    path: str
    content: bytes
    content_type: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillBundle:
    """A skill read from an archive: its SKILL.md text, its other files (SKILL.md excluded)
    and the single top-level folder SKILL.md sat in, or None when it sat at the root."""

    skill_md: str
    files: list[BundledFile]
    folder: str | None = None


def _skill_md_error(message: str) -> Invalid:
    return Invalid(INVALID_SKILL_MD, [field_error("skillMd", message)])


def _is_fence(line: str) -> bool:
    return line.rstrip(" \t\r") == _FENCE


def split_front_matter(skill_md: str) -> tuple[str, str]:
    """The YAML text between SKILL.md's opening `---` line (its first line, after an optional
    byte order mark) and the next `---` line, and the Markdown body after that line.

    Lines end with LF or CRLF; spaces after a `---` are allowed. `Invalid` naming `skillMd`
    when the front matter is missing or never closed."""
    text = skill_md.removeprefix(_BOM)
    lines = text.split("\n")
    if not _is_fence(lines[0]):
        raise _skill_md_error("must start with a '---' line opening the YAML front matter")
    for index in range(1, len(lines)):
        if _is_fence(lines[index]):
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :])
    raise _skill_md_error("front matter is not closed by a '---' line")


def is_skill_name(value: object) -> bool:
    """Whether `value` follows the skill-name rule: 1 to `NAME_MAX` lower-case letters, digits
    and single hyphens, not starting or ending with one (other resources' names follow it
    too)."""
    return isinstance(value, str) and len(value) <= NAME_MAX and bool(_NAME.fullmatch(value))


def _name_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    if not value:
        return "must not be empty"
    if len(value) > NAME_MAX:
        return f"must be at most {NAME_MAX} characters"
    if _NAME.fullmatch(value):
        return None
    if not _NAME_CHARS.fullmatch(value):
        return "may contain only lower-case letters (a-z), digits and hyphens"
    if value.startswith("-") or value.endswith("-"):
        return "must not start or end with a hyphen"
    return "must not contain consecutive hyphens"


def _text_problem(value: object, field: str, longest: int | None) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    try:
        check_storable(value, field)
    except Invalid as error:
        return str(error.details[0]["message"])
    if longest is not None and not value:
        return "must not be empty"
    if longest is not None and len(value) > longest:
        return f"must be at most {longest} characters"
    return None


def _metadata_problem(value: object) -> str | None:
    if not isinstance(value, Mapping):
        return "must be a map of string keys to string values"
    for key, item in value.items():
        if not isinstance(key, str):
            return f"key {key!r} must be a string"
        if not isinstance(item, str):
            return f"value of {key!r} must be a string (quote it)"
        for text in (key, item):
            problem = _text_problem(text, "metadata", None)
            if problem:
                return problem
    return None


def manifest_from_front_matter(data: object) -> SkillManifest:
    """The manifest a parsed front matter declares, checked against the Agent Skills rules.

    `name` is required: 1-64 lower-case letters, digits and single hyphens, neither first nor
    last. `description` is required: 1-1024 characters once trimmed, stored trimmed. Optional:
    `license` (string), `compatibility` (1-500 characters), `metadata` (map of string to
    string), `allowed-tools` (string). Other keys are ignored. Every breach becomes one
    `details` entry naming its front matter key, all in a single `Invalid`."""
    if not isinstance(data, Mapping):
        raise _skill_md_error("front matter must be a YAML mapping of keys to values")
    errors: list[dict[str, object]] = []

    def check(key: str, problem: str | None) -> None:
        if problem:
            errors.append(field_error(key, problem))

    name = data.get("name")
    check("name", "is required" if name is None else _name_problem(name))
    raw_description = data.get("description")
    description = raw_description.strip() if isinstance(raw_description, str) else None
    if raw_description is None:
        check("description", "is required")
    else:
        check("description", _text_problem(description, "description", DESCRIPTION_MAX))
    for key, longest in (("license", None), ("compatibility", COMPATIBILITY_MAX)):
        if key in data:
            check(key, _text_problem(data[key], key, longest))
    if "allowed-tools" in data:
        check("allowed-tools", _text_problem(data["allowed-tools"], "allowed-tools", None))
    if "metadata" in data:
        check("metadata", _metadata_problem(data["metadata"]))
    if errors:
        raise Invalid(INVALID_SKILL_MD, errors)
    assert isinstance(name, str) and description is not None
    metadata = data.get("metadata", {})
    return SkillManifest(
        name=name,
        description=description,
        license=data.get("license"),
        compatibility=data.get("compatibility"),
        metadata=dict(metadata),
        allowed_tools=data.get("allowed-tools"),
    )


def check_folder_matches(manifest: SkillManifest, folder: str | None) -> None:
    """Nothing when the skill came without a folder or its folder is named as the skill;
    `Invalid` naming `name` otherwise (the specification wants the two equal)."""
    if folder is not None and folder != manifest.name:
        raise Invalid(
            "Skill name does not match its folder",
            [field_error("name", f"must equal the name of the skill's folder ({folder!r})")],
        )


def _path_problem(path: object) -> str | None:
    if not isinstance(path, str):
        return "must be a string"
    if not path:
        return "must not be empty"
    if len(path) > PATH_MAX:
        return f"must be at most {PATH_MAX} characters"
    if "\\" in path:
        return "must use '/' as separator, not a backslash"
    if path.startswith("/"):
        return "must be relative (no leading '/')"
    for segment in path.split("/"):
        if not segment:
            return "must not contain an empty segment ('//' or a trailing '/')"
        if segment in {".", ".."}:
            return "must not contain a '.' or '..' segment"
        if not _SEGMENT.fullmatch(segment):
            return "each segment may contain only letters, digits, '.', '_' and '-'"
    return None


def check_skill_path(path: object) -> str:
    """`path` unchanged when it is a valid bundled file path: relative, `/`-separated, at
    most 255 characters, each segment made of ASCII letters, digits, `.`, `_` and `-` and
    neither `.` nor `..`. `Invalid` naming `path` otherwise."""
    problem = _path_problem(path)
    if problem:
        raise Invalid(INVALID_PATH, [field_error("path", problem)])
    assert isinstance(path, str)
    return path


def is_skill_path(path: object) -> bool:
    """Whether `check_skill_path` accepts `path`."""
    return _path_problem(path) is None


def is_skill_md(path: str) -> bool:
    """Whether `path` names the skill's own SKILL.md (only at the skill's root)."""
    return path == SKILL_FILE


def guess_content_type(path: str) -> str:
    """The content type a bundled file is served with, from its name: fixed text types for
    the usual script, document and data files, else the standard library's guess, else
    `application/octet-stream`."""
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    if dot > 0:
        known = _TEXT_TYPES.get(name[dot:].lower())
        if known:
            return known
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed or "application/octet-stream"


SKILL_NOT_FOUND = "Skill not found"
SKILL_ID_REQUIRED = "Valid skill ID is required"
SKILL_NAME_TAKEN = "A skill with this name already exists"
SKILL_CHANGED = "Skill was changed by someone else"
SKILL_FILE_NOT_FOUND = "File not found"
SKILL_MD_ELSEWHERE = "SKILL.md cannot be changed here; replace it with PUT /skills/manage"
SKILL_MD_TYPE = "text/markdown"
MAX_SKILL_MD_BYTES = 256 * 1024
EXPECTED_VERSION_INVALID = "expectedVersion must be a positive integer"
CONTENT_INVALID = "content must be base64-encoded bytes"


def parse_skill_id(value: object) -> int:
    """A skill's id: a positive 64-bit integer (400 "Valid skill ID is required")."""
    return parse_positive_id(value, SKILL_ID_REQUIRED)


def parse_skill_md(value: object) -> str:
    """SKILL.md as sent: a non-empty string of at most 256 KiB of UTF-8 (its front matter is
    read by the `FrontMatterParser` port)."""
    if not isinstance(value, str) or not value.strip():
        raise Invalid(required("skillMd"), [field_error("skillMd", "a non-empty string")])
    if len(value.encode("utf-8", "surrogatepass")) > MAX_SKILL_MD_BYTES:
        raise Invalid(
            f"SKILL.md may be at most {MAX_SKILL_MD_BYTES // 1024} KiB",
            [field_error("skillMd", f"at most {MAX_SKILL_MD_BYTES} bytes")],
        )
    return value


def parse_expected_version(value: object) -> int | None:
    """The version a change expects the skill to be at: absent, or a positive integer."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BIGINT:
        raise Invalid(
            EXPECTED_VERSION_INVALID, [field_error("expectedVersion", "a positive integer")]
        )
    return value


def bundled_file_path(path: object) -> str:
    """A bundled file's path, checked (`check_skill_path`); SKILL.md is refused (it changes
    through its skill)."""
    checked = check_skill_path(path)
    if is_skill_md(checked):
        raise Invalid(SKILL_MD_ELSEWHERE, [field_error("path", "SKILL.md is not a bundled file")])
    return checked


def parse_file_content(value: object) -> bytes:
    """A bundled file's bytes, sent as standard padded base64."""
    if not isinstance(value, str):
        raise Invalid(CONTENT_INVALID, [field_error("content", "a base64 string")])
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise Invalid(CONTENT_INVALID, [field_error("content", "not valid base64")]) from None


def file_content_type(value: object, path: str) -> str:
    """A bundled file's content type: a MIME type, or guessed from `path` when absent."""
    if value is None:
        return guess_content_type(path)
    if not isinstance(value, str):
        raise Invalid(CONTENT_TYPE_INVALID, [field_error("contentType", "invalid MIME type")])
    return validate_content_type(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillFile:
    """A file of a skill as listed: its path in the skill's folder, size in bytes, content type,
    SHA-256 (hex) and when it last changed. `storage_key` is where its bytes are kept; None for
    SKILL.md, which is kept with the skill itself."""

    path: str
    size: int
    content_type: str
    sha256: str
    updated_at: datetime
    storage_key: str | None = None

    @classmethod
    def stored(
        cls, path: str, data: bytes, *, content_type: str, storage_key: str, at: datetime
    ) -> SkillFile:
        """The record of `data` kept at `storage_key`: its size and SHA-256 computed."""
        return cls(
            path=path,
            size=len(data),
            content_type=content_type,
            sha256=hashlib.sha256(data).hexdigest(),
            updated_at=at,
            storage_key=storage_key,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    """An active skill of an organization: its manifest, its SKILL.md as sent, and `version`,
    which starts at 1 and grows by one with every change of SKILL.md or of a bundled file.
    `file_count` counts SKILL.md and the bundled files."""

    id: int
    org_id: str
    user_id: str
    manifest: SkillManifest
    skill_md: str
    skill_md_sha256: str
    skill_md_updated_at: datetime
    version: int
    file_count: int
    created_at: datetime
    updated_at: datetime

    @property
    def skill_md_file(self) -> SkillFile:
        """SKILL.md as one of the skill's files."""
        return SkillFile(
            path=SKILL_FILE,
            size=len(self.skill_md.encode()),
            content_type=SKILL_MD_TYPE,
            sha256=self.skill_md_sha256,
            updated_at=self.skill_md_updated_at,
        )


def skill_file_key(org_id: str, skill_id: int, path: str, version: int | None = None) -> str:
    """Where a bundled file's bytes are kept: below the organization's prefix, in the skill's
    folder, at the file's own (checked) path; with `version` (the skill's version the bytes
    arrive with), in that version's folder, so that a replacement never overwrites the bytes
    the committed record names."""
    if version is None:
        return f"orgs/{org_id}/skills/{skill_id}/files/{path}"
    return f"orgs/{org_id}/skills/{skill_id}/versions/{version}/{path}"


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillLimits:
    """How much one skill may hold: files (SKILL.md included), bytes per file and in all. An
    archive is held to the same limits, counted while it is decompressed."""

    max_files: int = 500
    max_file_bytes: int = 10 * 1024 * 1024
    max_total_bytes: int = 50 * 1024 * 1024
