"""Passages and hybrid search in Postgres: pgvector HNSW plus full text, fused by rank.

Vector search runs once per (model, dimension count) with the dimension count written into
the statement, so that the planner uses that count's partial HNSW index; pgvector 0.8's
iterative scan (set when the connection is scoped) keeps filtered searches from coming back
short. Full-text search runs over the same knowledge bases, and the two rankings are merged
by reciprocal rank fusion (k = 60).
"""

from __future__ import annotations

from collections.abc import Sequence

from adapters.postgres.database import OrgConnection
from application.ports.chunk_repository import EmbeddedChunk, SearchScope
from domain.chunks import SearchResult, TextChunk

RRF_K = 60
_ensured_dimensions: set[int] = set()

DELETE_FILE_CHUNKS = (
    "DELETE FROM chunks WHERE org_id = $1 AND file_record_id = $2 AND embedding_model = $3"
)
INSERT_CHUNK = """
    INSERT INTO chunks (org_id, knowledge_base_id, file_record_id, embedding_model, dimensions,
        chunk_index, page_number, start_char, end_char, text, embedding)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"""
FULL_TEXT = """
    SELECT c.id FROM chunks c, websearch_to_tsquery('simple', $4) q
    WHERE c.org_id = $1
      AND (c.knowledge_base_id, c.embedding_model) IN (
          SELECT * FROM unnest($2::bigint[], $3::text[]))
      AND c.tsv @@ q
    ORDER BY ts_rank_cd(c.tsv, q) DESC, c.id
    LIMIT $5"""
PASSAGES = """
    SELECT chunk_index, text, page_number, start_char, end_char FROM chunks
    WHERE org_id = $1 AND file_record_id = $2 AND embedding_model = $3 ORDER BY chunk_index"""
DELETE_OTHER_MODELS = """
    DELETE FROM chunks WHERE org_id = $1 AND knowledge_base_id = $2 AND embedding_model <> $3"""
DETAILS = """
    SELECT c.id, c.text, c.page_number, c.knowledge_base_id, f.file_id::text, f.file_name
    FROM chunks c JOIN knowledge_base_files f ON f.id = c.file_record_id
    WHERE c.org_id = $1 AND c.id = ANY($2::bigint[])"""


async def ensure_chunk_index(db: OrgConnection, dimensions: int) -> None:
    """Make sure the HNSW index for that dimension count exists (once per process)."""
    if dimensions not in _ensured_dimensions:
        await db.execute("SELECT ap_ensure_chunk_index($1)", dimensions)
        _ensured_dimensions.add(dimensions)


def nearest_statement(dimensions: int) -> str:
    """The vector query for one dimension count (an integer, checked: part of the SQL)."""
    if not 1 <= int(dimensions) <= 4000:
        raise ValueError(f"unsupported dimension count: {dimensions}")
    kind = "halfvec" if dimensions > 2000 else "vector"
    cast = f"{kind}({int(dimensions)})"
    return f"""
        SELECT id FROM (
            SELECT c.id, c.embedding::{cast} <=> ($4::vector)::{cast} AS distance
            FROM chunks c
            WHERE c.dimensions = {int(dimensions)} AND c.org_id = $1
              AND c.knowledge_base_id = ANY($2::bigint[]) AND c.embedding_model = $3
            ORDER BY c.embedding::{cast} <=> ($4::vector)::{cast}
            LIMIT $5
        ) nearest ORDER BY distance, id"""


class PgChunkRepository:
    """`ChunkRepository` in Postgres with pgvector."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def replace_for_file(
        self,
        org_id: str,
        *,
        knowledge_base_id: int,
        file_record_id: int,
        embedding_model: str,
        dimensions: int,
        chunks: Sequence[EmbeddedChunk],
    ) -> None:
        await self._db.begin()
        await ensure_chunk_index(self._db, dimensions)
        await self._db.execute(DELETE_FILE_CHUNKS, org_id, file_record_id, embedding_model)
        if not chunks:
            return
        await self._db.raw.executemany(
            INSERT_CHUNK,
            [
                (
                    org_id,
                    knowledge_base_id,
                    file_record_id,
                    embedding_model,
                    dimensions,
                    item.chunk.index,
                    item.chunk.page_number,
                    item.chunk.start_char,
                    item.chunk.end_char,
                    item.chunk.text,
                    item.vector,
                )
                for item in chunks
            ],
        )

    async def passages_for_file(
        self, org_id: str, file_record_id: int, embedding_model: str
    ) -> list[TextChunk]:
        rows = await self._db.fetch(PASSAGES, org_id, file_record_id, embedding_model)
        return [
            TextChunk(index=r[0], text=r[1], page_number=r[2], start_char=r[3], end_char=r[4])
            for r in rows
        ]

    async def delete_for_knowledge_base(
        self, org_id: str, knowledge_base_id: int, *, except_model: str
    ) -> None:
        await self._db.execute(DELETE_OTHER_MODELS, org_id, knowledge_base_id, except_model)

    async def search(
        self, org_id: str, *, query: str, scopes: Sequence[SearchScope], top_k: int
    ) -> list[SearchResult]:
        depth = max(top_k * 4, 40)
        rankings: list[list[int]] = []
        for scope in scopes:
            rows = await self._db.fetch(
                nearest_statement(scope.dimensions),
                org_id, scope.knowledge_base_ids, scope.embedding_model, scope.query_vector, depth,
            )  # fmt: skip
            rankings.append([row[0] for row in rows])
        kb_ids = [kb for scope in scopes for kb in scope.knowledge_base_ids]
        models = [scope.embedding_model for scope in scopes for _ in scope.knowledge_base_ids]
        if query.strip():
            rows = await self._db.fetch(FULL_TEXT, org_id, kb_ids, models, query, depth)
            rankings.append([row[0] for row in rows])
        scores: dict[int, float] = {}
        for ranking in rankings:
            for rank, chunk_id in enumerate(ranking, start=1):
                scores[chunk_id] = scores.get(chunk_id, 0.0) + 1.0 / (RRF_K + rank)
        best = sorted(scores, key=lambda chunk_id: (-scores[chunk_id], chunk_id))[:top_k]
        if not best:
            return []
        details = {row[0]: row for row in await self._db.fetch(DETAILS, org_id, best)}
        return [
            SearchResult(
                chunk_id=chunk_id,
                text=details[chunk_id][1],
                page_number=details[chunk_id][2],
                knowledge_base_id=details[chunk_id][3],
                file_id=details[chunk_id][4],
                file_name=details[chunk_id][5],
                score=round(scores[chunk_id], 6),
            )
            for chunk_id in best
            if chunk_id in details
        ]
