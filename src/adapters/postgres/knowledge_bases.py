"""`KnowledgeBaseRepository` on an organization-scoped asyncpg connection.

Like every repository here: each statement also filters by `org_id` (row-level security is the
second wall, not the only one); statements are fixed strings built once from column lists, so
every value is a bound parameter and asyncpg keeps them prepared; rows are read by position.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from adapters.postgres.database import OrgConnection
from domain.knowledge_bases import KnowledgeBase, KnowledgeBaseSummary, NewKnowledgeBase

KB_ORDER = (
    "id", "org_id", "user_id", "name", "description", "embedding_model", "embedding_dimensions",
    "extraction_model", "extraction_schema", "source", "trigger", "pending_embedding_model",
    "pending_embedding_dimensions", "reindex_error", "created_at", "updated_at", "chunk_size",
    "chunk_overlap", "inbound_email_address", "language",
)  # fmt: skip
UPDATABLE_KB_FIELDS = frozenset(KB_ORDER) - {"id", "org_id", "user_id", "created_at", "updated_at"}
KB_COLUMNS = ", ".join(f"kb.{name}" for name in KB_ORDER)
KB_RETURNING = ", ".join(KB_ORDER)

# Totals come from `knowledge_base_stats`, kept by a trigger as files change (migration 0013),
# so a listing reads one row per knowledge base however many files it holds.
SUMMARIES = f"""
    SELECT {KB_COLUMNS}, coalesce(st.file_count, 0), coalesce(st.total_size, 0),
           st.last_file_uploaded_at, coalesce(st.files_in_progress, 0)
    FROM knowledge_bases kb
    LEFT JOIN knowledge_base_stats st ON st.knowledge_base_id = kb.id AND st.org_id = $1
    WHERE kb.org_id = $1"""
LIST_SUMMARIES = SUMMARIES + " ORDER BY kb.created_at DESC, kb.id DESC"
GET_SUMMARY = SUMMARIES + " AND kb.id = $2"
GET_KB = f"SELECT {KB_COLUMNS} FROM knowledge_bases kb WHERE kb.org_id = $1 AND kb.id = $2"
INSERT_KB = f"""
    INSERT INTO knowledge_bases (org_id, user_id, name, description, embedding_model,
        embedding_dimensions, extraction_model, extraction_schema, chunk_size, chunk_overlap,
        source, inbound_email_address, language)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
    RETURNING {KB_RETURNING}"""
DELETE_KB = "DELETE FROM knowledge_bases WHERE org_id = $1 AND id = $2"
_KB_WIDTH = len(KB_ORDER)
_SUMMARY_WIDTH = _KB_WIDTH + 4  # the four totals of `SUMMARIES`


# Rows are read by position straight into the entities, whose fields are in column order
# (checked below): keyword calls cost several times as much, per row of a listing.
def _kb(r: Any) -> KnowledgeBase:
    return KnowledgeBase(*r[:_KB_WIDTH])


def _summary(r: Any) -> KnowledgeBaseSummary:
    return KnowledgeBaseSummary(*r[:_SUMMARY_WIDTH])


def _check_column_order() -> None:
    totals = ("file_count", "total_size", "last_file_uploaded_at", "files_in_progress")
    for entity, order in ((KnowledgeBase, KB_ORDER), (KnowledgeBaseSummary, KB_ORDER + totals)):
        names = tuple(field.name for field in fields(entity))
        if names != order:
            raise TypeError(f"{entity.__name__} fields {names} are not the columns {order}")


_check_column_order()


class PgKnowledgeBaseRepository:
    """`KnowledgeBaseRepository` in Postgres."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def add(self, new: NewKnowledgeBase) -> KnowledgeBase:
        (row,) = await self._db.fetch_in_transaction(
            INSERT_KB, new.org_id, new.user_id, new.name, new.description, new.embedding_model,
            new.embedding_dimensions, new.extraction_model, new.extraction_schema, new.chunk_size,
            new.chunk_overlap, new.source, new.inbound_email_address, new.language,
        )  # fmt: skip
        return _kb(row)

    async def get(
        self, org_id: str, kb_id: int, *, for_update: bool = False, for_share: bool = False
    ) -> KnowledgeBase | None:
        if for_update or for_share:
            lock = " FOR UPDATE" if for_update else " FOR SHARE"
            rows = await self._db.fetch_in_transaction(GET_KB + lock, org_id, kb_id)
        else:
            rows = await self._db.fetch(GET_KB, org_id, kb_id)
        return _kb(rows[0]) if rows else None

    async def list_summaries(self, org_id: str) -> list[KnowledgeBaseSummary]:
        return [_summary(r) for r in await self._db.fetch(LIST_SUMMARIES, org_id)]

    async def get_summary(self, org_id: str, kb_id: int) -> KnowledgeBaseSummary | None:
        rows = await self._db.fetch(GET_SUMMARY, org_id, kb_id)
        return _summary(rows[0]) if rows else None

    async def update(self, org_id: str, kb_id: int, changes: Mapping[str, Any]) -> KnowledgeBase:
        unknown = set(changes) - UPDATABLE_KB_FIELDS
        if unknown:
            raise ValueError(f"not updatable: {sorted(unknown)}")
        names = list(changes)
        assignments = ", ".join(f"{name} = ${i}" for i, name in enumerate(names, start=3))
        sql = (
            f"UPDATE knowledge_bases SET {assignments}, updated_at = now() "
            f"WHERE org_id = $1 AND id = $2 RETURNING {KB_RETURNING}"
        )
        (row,) = await self._db.fetch_in_transaction(sql, org_id, kb_id, *changes.values())
        return _kb(row)

    async def delete(self, org_id: str, kb_id: int) -> None:
        await self._db.execute(DELETE_KB, org_id, kb_id)
