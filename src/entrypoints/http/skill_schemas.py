"""Request and response bodies of `/skills/*`: msgspec Structs, camelCase."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from msgspec import Meta

from application.use_cases.create_skill import SkillView
from domain.files import CONTENT_TYPE_INVALID
from domain.skills import (
    CONTENT_INVALID,
    EXPECTED_VERSION_INVALID,
    INVALID_PATH,
    MAX_SKILL_MD_BYTES,
    PATH_MAX,
    SKILL_ID_REQUIRED,
    Skill,
)
from domain.text import required
from entrypoints.http.rules import ABSENT, Rule
from entrypoints.http.schemas import NOT_BLANK, Camel, MimeType, PositiveId, documented

SKILL_MD_LIMIT = f"at most {MAX_SKILL_MD_BYTES // 1024} KiB of UTF-8"
SkillMd = Annotated[
    str,
    Meta(
        min_length=1,
        pattern=r"\S",
        description="SKILL.md as sent: YAML front matter between `---` lines (name, "
        f"description, …), then Markdown instructions; {SKILL_MD_LIMIT}",
        extra_json_schema=documented(NOT_BLANK),
    ),
]
# A relative path whose segments are ASCII letters, digits, `.`, `_` and `-`, none of them
# `.` or `..` (the use case checks it again, with its own message).
PATH_PATTERN = r"^(?!(.*/)?\.\.?(/|$))[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$"
SkillPath = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=PATH_MAX,
        description="Relative, `/`-separated: letters, digits, `.`, `_`, `-`; no `.` or `..`",
        extra_json_schema=documented(PATH_PATTERN, examples=["scripts/extract.py"]),
    ),
]
BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
Base64 = Annotated[
    str,
    Meta(
        description="The file's bytes, base64-encoded (standard alphabet, padded)",
        extra_json_schema=documented(BASE64),
    ),
]


SKILL_MD_RULE = Rule("skillMd", required("skillMd"), ABSENT, "a non-empty string")
PATH_RULE = Rule("path", INVALID_PATH, detail="a relative path of letters, digits, '.', '_', '-'")


class CreateSkillBody(Camel):
    rules = (SKILL_MD_RULE,)

    skill_md: SkillMd


class UpdateSkillBody(Camel):
    rules = (
        Rule("skillId", SKILL_ID_REQUIRED),
        SKILL_MD_RULE,
        Rule("expectedVersion", EXPECTED_VERSION_INVALID, detail="a positive integer"),
    )

    skill_id: PositiveId
    skill_md: SkillMd
    expected_version: (
        Annotated[
            PositiveId,
            Meta(description="Write only if the skill is still at this version (409 otherwise)"),
        ]
        | None
    ) = None


class PutSkillFileBody(Camel):
    rules = (
        Rule("skillId", SKILL_ID_REQUIRED),
        PATH_RULE,
        Rule("content", CONTENT_INVALID, detail="a base64 string"),
        Rule("contentType", CONTENT_TYPE_INVALID, detail="invalid MIME type"),
    )

    skill_id: PositiveId
    path: SkillPath
    content: Base64
    content_type: MimeType | None = None


class SkillFileOut(Camel):
    path: str
    size: int
    content_type: str
    sha256: str
    updated_at: datetime


class SkillOut(Camel):
    id: int
    name: str
    description: str
    license: str | None
    compatibility: str | None
    metadata: dict[str, str]
    allowed_tools: str | None
    version: int
    file_count: int
    created_at: datetime
    updated_at: datetime
    user_id: str

    @classmethod
    def of(cls, skill: Skill) -> SkillOut:
        return cls(**_record(skill))


class SkillDetailOut(SkillOut):
    skill_md: str
    files: list[SkillFileOut]

    @classmethod
    def of_view(cls, view: SkillView) -> SkillDetailOut:
        return cls(
            **_record(view.skill),
            skill_md=view.skill.skill_md,
            files=SkillFileOut.from_entities(view.files),
        )


def _record(skill: Skill) -> dict[str, Any]:
    manifest = skill.manifest
    return {
        "id": skill.id,
        "name": manifest.name,
        "description": manifest.description,
        "license": manifest.license,
        "compatibility": manifest.compatibility,
        "metadata": dict(manifest.metadata),
        "allowed_tools": manifest.allowed_tools,
        "version": skill.version,
        "file_count": skill.file_count,
        "created_at": skill.created_at,
        "updated_at": skill.updated_at,
        "user_id": skill.user_id,
    }


class SkillResponse(Camel):
    success: bool
    skill: SkillDetailOut


class SkillListResponse(Camel):
    success: bool
    skills: list[SkillOut]


class SkillFileResponse(Camel):
    success: bool
    file: SkillFileOut
