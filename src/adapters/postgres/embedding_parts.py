"""Staged parts of large files in Postgres: `embedding_parts` holds each part's passages and
models, `staged_chunks` the vectors of finished parts until the file is published."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapters.postgres.chunks import ensure_chunk_index
from adapters.postgres.database import OrgConnection
from application.ports.embedding_parts import EmbeddedPart, ModelChoice, StagedPart
from domain.chunks import TextChunk

DISCARD = """
    DELETE FROM embedding_parts WHERE org_id = $1 AND file_record_id = $2
      AND ($3::bigint IS NULL OR EXISTS (
          SELECT 1 FROM embedding_parts p
          WHERE p.org_id = $1 AND p.file_record_id = $2 AND p.id = $3))"""
STAGE = """
    INSERT INTO embedding_parts (org_id, file_record_id, part, models, passages)
    SELECT $1, $2, p.number - 1, $3::jsonb, p.passages
    FROM jsonb_array_elements($4::jsonb) WITH ORDINALITY AS p(passages, number)
    RETURNING id, part"""
BEGIN = """
    UPDATE embedding_parts SET starts = starts + 1 WHERE org_id = $1 AND id = $2
    RETURNING file_record_id, passages, models, starts, done"""
MARK_DONE = """
    UPDATE embedding_parts SET done = true WHERE org_id = $1 AND id = $2
    RETURNING file_record_id"""
INSERT_STAGED = """
    INSERT INTO staged_chunks (part_id, org_id, file_record_id, embedding_model, dimensions,
        chunk_index, page_number, start_char, end_char, text, embedding)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"""
REMAINING = """
    SELECT count(*) FROM embedding_parts
    WHERE org_id = $1 AND file_record_id = $2 AND NOT done"""
PASSAGES = """
    SELECT passages FROM embedding_parts WHERE org_id = $1 AND file_record_id = $2"""
DELETE_PUBLISHED_MODELS = """
    DELETE FROM chunks
    WHERE org_id = $1 AND file_record_id = $2 AND embedding_model = ANY($3::text[])"""
PUBLISH = """
    INSERT INTO chunks (org_id, knowledge_base_id, file_record_id, embedding_model, dimensions,
        chunk_index, page_number, start_char, end_char, text, embedding)
    SELECT org_id, $4, file_record_id, embedding_model, dimensions, chunk_index, page_number,
        start_char, end_char, text, embedding
    FROM staged_chunks
    WHERE org_id = $1 AND file_record_id = $2 AND embedding_model = ANY($3::text[])
    ORDER BY embedding_model, chunk_index"""


def _passage_rows(passages: Sequence[TextChunk]) -> list[list[Any]]:
    return [[p.index, p.page_number, p.start_char, p.end_char, p.text] for p in passages]


def _passages(rows: Sequence[Sequence[Any]]) -> list[TextChunk]:
    return [
        TextChunk(index=r[0], page_number=r[1], start_char=r[2], end_char=r[3], text=r[4])
        for r in rows
    ]


class PgEmbeddingParts:
    """`EmbeddingParts` in Postgres."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def stage(
        self,
        org_id: str,
        *,
        file_record_id: int,
        models: Sequence[ModelChoice],
        parts: Sequence[Sequence[TextChunk]],
    ) -> list[int]:
        await self.discard(org_id, file_record_id)
        rows = await self._db.fetch_in_transaction(
            STAGE,
            org_id,
            file_record_id,
            [[m.model, m.dimensions] for m in models],
            [_passage_rows(part) for part in parts],
        )
        return [row[0] for row in sorted(rows, key=lambda row: row[1])]

    async def begin(self, org_id: str, part_id: int) -> StagedPart | None:
        rows = await self._db.fetch_in_transaction(BEGIN, org_id, part_id)
        if not rows:
            return None
        file_record_id, passages, models, starts, done = rows[0]
        return StagedPart(
            file_record_id=file_record_id,
            passages=_passages(passages),
            models=[ModelChoice(model=m[0], dimensions=m[1]) for m in models],
            starts=starts,
            done=done,
        )

    async def save(self, org_id: str, part_id: int, embedded: Sequence[EmbeddedPart]) -> int | None:
        rows = await self._db.fetch_in_transaction(MARK_DONE, org_id, part_id)
        if not rows:
            return None
        file_record_id = rows[0][0]
        records = [
            (
                part_id,
                org_id,
                file_record_id,
                part.model.model,
                part.model.dimensions,
                item.chunk.index,
                item.chunk.page_number,
                item.chunk.start_char,
                item.chunk.end_char,
                item.chunk.text,
                item.vector,
            )
            for part in embedded
            for item in part.chunks
        ]
        if records:
            await self._db.raw.executemany(INSERT_STAGED, records)
        (remaining,) = await self._db.fetch(REMAINING, org_id, file_record_id)
        return int(remaining[0])

    async def passages(self, org_id: str, file_record_id: int) -> list[TextChunk]:
        rows = await self._db.fetch(PASSAGES, org_id, file_record_id)
        staged = [passage for row in rows for passage in _passages(row[0])]
        return sorted(staged, key=lambda passage: passage.index)

    async def publish(
        self,
        org_id: str,
        *,
        knowledge_base_id: int,
        file_record_id: int,
        models: Sequence[ModelChoice],
    ) -> None:
        names = [choice.model for choice in models]
        for choice in models:
            await ensure_chunk_index(self._db, choice.dimensions)
        if names:
            await self._db.execute(DELETE_PUBLISHED_MODELS, org_id, file_record_id, names)
            await self._db.execute(PUBLISH, org_id, file_record_id, names, knowledge_base_id)
        await self.discard(org_id, file_record_id)

    async def discard(
        self, org_id: str, file_record_id: int, *, if_staged: int | None = None
    ) -> bool:
        status = await self._db.execute(DISCARD, org_id, file_record_id, if_staged)
        return status != "DELETE 0"
