"""`SkillRepository` on an organization-scoped asyncpg connection.

As in `knowledge_bases.py`: fixed statements, every one filtering by `org_id` (row-level security
is the second wall) and by `deleted_at IS NULL` (a soft-deleted skill is a missing one), rows
read by position. A skill's `file_count` is its bundled files plus its SKILL.md. Every change of
SKILL.md or of a file record raises the skill's version in the same statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from adapters.postgres.database import OrgConnection
from application.ports.skill_catalog import SkillSummary
from application.ports.skill_repository import SkillDocument
from domain.errors import Conflict, NotFound
from domain.skills import (
    SKILL_NAME_TAKEN,
    SKILL_NOT_FOUND,
    Skill,
    SkillFile,
    SkillManifest,
    skill_file_key,
)

NAME_INDEX = "ux_skills_org_name"
ACTIVE = "s.org_id = $1 AND s.deleted_at IS NULL"
FILE_COUNT = "(SELECT count(*) FROM skill_files f WHERE f.org_id = $1 AND f.skill_id = s.id) + 1"
SKILL_COLUMNS = (
    "s.id, s.org_id, s.user_id, s.name, s.description, s.license, s.compatibility, s.metadata, "
    "s.allowed_tools, s.skill_md, s.skill_md_sha256, s.skill_md_updated_at, s.version, "
    f"{FILE_COUNT}, s.created_at, s.updated_at"
)
FILE_COLUMNS = "f.path, f.size, f.content_type, f.sha256, f.updated_at, f.storage_key"

GET_SKILL = f"SELECT {SKILL_COLUMNS} FROM skills s WHERE {ACTIVE} AND s.id = $2"
LOCK_SKILL = GET_SKILL + " FOR UPDATE OF s"
LIST_SKILLS = f"SELECT {SKILL_COLUMNS} FROM skills s WHERE {ACTIVE} ORDER BY s.name, s.id"
INSERT_SKILL = f"""
    INSERT INTO skills AS s (org_id, user_id, name, description, license, compatibility,
        metadata, allowed_tools, skill_md, skill_md_sha256)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
    ON CONFLICT (org_id, name) WHERE deleted_at IS NULL DO NOTHING
    RETURNING {SKILL_COLUMNS}"""
REPLACE_DOCUMENT = f"""
    UPDATE skills s SET name = $3, description = $4, license = $5, compatibility = $6,
        metadata = $7, allowed_tools = $8, skill_md = $9, skill_md_sha256 = $10,
        skill_md_updated_at = now(), version = s.version + 1, updated_at = now()
    WHERE {ACTIVE} AND s.id = $2
    RETURNING {SKILL_COLUMNS}"""
SOFT_DELETE = f"""
    UPDATE skills s SET deleted_at = now(), updated_at = now()
    WHERE {ACTIVE} AND s.id = $2 RETURNING s.id"""
LIST_FILES = f"""
    SELECT {FILE_COLUMNS} FROM skill_files f
    JOIN skills s ON s.id = f.skill_id AND {ACTIVE}
    WHERE f.org_id = $1 AND f.skill_id = $2
    ORDER BY f.path COLLATE "C" """
GET_FILE = f"""
    SELECT {FILE_COLUMNS} FROM skill_files f
    JOIN skills s ON s.id = f.skill_id AND {ACTIVE}
    WHERE f.org_id = $1 AND f.skill_id = $2 AND f.path = $3"""
PUT_FILE = f"""
    WITH bumped AS (
        UPDATE skills s SET version = s.version + 1, updated_at = now()
        WHERE {ACTIVE} AND s.id = $2 RETURNING s.id, s.org_id
    )
    INSERT INTO skill_files AS f (org_id, skill_id, path, storage_key, size, content_type, sha256)
    SELECT b.org_id, b.id, $3, $4, $5, $6, $7 FROM bumped b
    ON CONFLICT (skill_id, path) DO UPDATE SET storage_key = EXCLUDED.storage_key,
        size = EXCLUDED.size, content_type = EXCLUDED.content_type, sha256 = EXCLUDED.sha256,
        updated_at = now()
    RETURNING {FILE_COLUMNS}"""
ADD_FILES = f"""
    INSERT INTO skill_files (org_id, skill_id, path, storage_key, size, content_type, sha256)
    SELECT s.org_id, s.id, u.path, u.storage_key, u.size, u.content_type, u.sha256
    FROM skills s, unnest($3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[])
        AS u(path, storage_key, size, content_type, sha256)
    WHERE {ACTIVE} AND s.id = $2
    RETURNING skill_id"""
DELETE_FILE = f"""
    WITH d AS (
        DELETE FROM skill_files f USING skills s
        WHERE f.org_id = $1 AND f.skill_id = $2 AND f.path = $3 AND s.id = f.skill_id AND {ACTIVE}
        RETURNING f.skill_id
    )
    UPDATE skills s SET version = s.version + 1, updated_at = now()
    FROM d WHERE s.org_id = $1 AND s.id = d.skill_id RETURNING s.id"""
MISSING = """
    SELECT u.id FROM unnest($2::bigint[]) WITH ORDINALITY AS u(id, ord)
    WHERE NOT EXISTS (
        SELECT 1 FROM skills s WHERE s.org_id = $1 AND s.deleted_at IS NULL AND s.id = u.id)
    ORDER BY u.ord"""
SUMMARIES = f"""
    SELECT s.id, s.name, s.description
    FROM (SELECT id, min(ord) AS ord FROM unnest($2::bigint[]) WITH ORDINALITY AS u(id, ord)
          GROUP BY id) u
    JOIN skills s ON s.id = u.id AND {ACTIVE}
    ORDER BY u.ord"""


def _skill(r: Any) -> Skill:
    manifest = SkillManifest(
        name=r[3], description=r[4], license=r[5], compatibility=r[6], metadata=dict(r[7]),
        allowed_tools=r[8],
    )  # fmt: skip
    return Skill(
        id=r[0], org_id=r[1], user_id=r[2], manifest=manifest, skill_md=r[9],
        skill_md_sha256=r[10], skill_md_updated_at=r[11], version=r[12], file_count=r[13],
        created_at=r[14], updated_at=r[15],
    )  # fmt: skip


def _file(r: Any) -> SkillFile:
    return SkillFile(
        path=r[0], size=r[1], content_type=r[2], sha256=r[3], updated_at=r[4], storage_key=r[5]
    )


def _document(document: SkillDocument) -> tuple[Any, ...]:
    m = document.manifest
    return (
        m.name, m.description, m.license, m.compatibility, dict(m.metadata), m.allowed_tools,
        document.skill_md, document.sha256,
    )  # fmt: skip


class PgSkillRepository:
    """`SkillRepository` in Postgres, plus the skill summaries an agent's chat is told about.

    A name clash with an active skill becomes `Conflict`; on insert through `ON CONFLICT ... DO
    NOTHING`, on a rename through the unique index's violation (which ends the transaction,
    as the use case does on `Conflict`). Writes to a skill that is not active raise `NotFound`.
    """

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def add(self, org_id: str, user_id: str, document: SkillDocument) -> Skill:
        rows = await self._db.fetch_in_transaction(
            INSERT_SKILL, org_id, user_id, *_document(document)
        )
        if not rows:
            raise Conflict(SKILL_NAME_TAKEN)
        return _skill(rows[0])

    async def get(self, org_id: str, skill_id: int, *, lock: bool = False) -> Skill | None:
        if lock:
            rows = await self._db.fetch_in_transaction(LOCK_SKILL, org_id, skill_id)
        else:
            rows = await self._db.fetch(GET_SKILL, org_id, skill_id)
        return _skill(rows[0]) if rows else None

    async def list_active(self, org_id: str) -> list[Skill]:
        return [_skill(r) for r in await self._db.fetch(LIST_SKILLS, org_id)]

    async def replace_document(self, org_id: str, skill_id: int, document: SkillDocument) -> Skill:
        try:
            rows = await self._db.fetch_in_transaction(
                REPLACE_DOCUMENT, org_id, skill_id, *_document(document)
            )
        except asyncpg.UniqueViolationError as error:
            if error.constraint_name == NAME_INDEX:
                raise Conflict(SKILL_NAME_TAKEN) from error
            raise
        if not rows:
            raise NotFound(SKILL_NOT_FOUND)
        return _skill(rows[0])

    async def soft_delete(self, org_id: str, skill_id: int) -> bool:
        return bool(await self._db.fetch_in_transaction(SOFT_DELETE, org_id, skill_id))

    async def list_files(self, org_id: str, skill_id: int) -> list[SkillFile]:
        return [_file(r) for r in await self._db.fetch(LIST_FILES, org_id, skill_id)]

    async def get_file(self, org_id: str, skill_id: int, path: str) -> SkillFile | None:
        rows = await self._db.fetch(GET_FILE, org_id, skill_id, path)
        return _file(rows[0]) if rows else None

    async def put_file(self, org_id: str, skill_id: int, file: SkillFile) -> SkillFile:
        rows = await self._db.fetch_in_transaction(
            PUT_FILE, org_id, skill_id, file.path,
            file.storage_key or skill_file_key(org_id, skill_id, file.path), file.size,
            file.content_type, file.sha256,
        )  # fmt: skip
        if not rows:
            raise NotFound(SKILL_NOT_FOUND)
        return _file(rows[0])

    async def add_files(self, org_id: str, skill_id: int, files: Sequence[SkillFile]) -> None:
        # An archive may hold a path twice; its last entry is the one stored.
        unique = list({f.path: f for f in files}.values())
        if not unique:
            return
        rows = await self._db.fetch_in_transaction(
            ADD_FILES, org_id, skill_id, [f.path for f in unique],
            [f.storage_key or skill_file_key(org_id, skill_id, f.path) for f in unique],
            [f.size for f in unique], [f.content_type for f in unique],
            [f.sha256 for f in unique],
        )  # fmt: skip
        if not rows:
            raise NotFound(SKILL_NOT_FOUND)

    async def delete_file(self, org_id: str, skill_id: int, path: str) -> bool:
        return bool(await self._db.fetch_in_transaction(DELETE_FILE, org_id, skill_id, path))

    async def missing(self, org_id: str, skill_ids: list[int]) -> list[int]:
        if not skill_ids:
            return []
        return [r[0] for r in await self._db.fetch(MISSING, org_id, skill_ids)]

    async def summaries(self, org_id: str, skill_ids: list[int]) -> list[SkillSummary]:
        if not skill_ids:
            return []
        rows = await self._db.fetch(SUMMARIES, org_id, skill_ids)
        return [SkillSummary(id=r[0], name=r[1], description=r[2]) for r in rows]
