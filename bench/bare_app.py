"""The bare baseline for `kb_endpoints.py`: Litestar, one asyncpg pool and msgspec, no auth and
no DI. It runs the SELECTs that the service's repositories run for `GET /kb/files?kbId=` (the
whole listing, or a page with `limit` and `cursor`) and `GET /kb/manage`, and returns the same
JSON bodies.

    BENCH_PG_HOST=<data dir>/pgdata BENCH_ORG_ID=org_bench python bench/bare_app.py --port 8001

The organization comes from the `org` query parameter, else `BENCH_ORG_ID`; since the pool
connects as the superuser, every query filters by `org_id` itself, as the repositories do.
Each response struct is built from its record by column name, as a hand-written endpoint
usually builds it.
"""

from __future__ import annotations

import argparse
import base64
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import asyncpg
import msgspec
import uvicorn
from litestar import Litestar, MediaType, Response, get
from litestar.params import Parameter

ORG_ID = os.environ.get("BENCH_ORG_ID", "org_bench")

KB_COLUMNS = (
    "knowledge_bases.id, knowledge_bases.org_id, knowledge_bases.user_id, knowledge_bases.name, "
    "knowledge_bases.description, knowledge_bases.embedding_model, "
    "knowledge_bases.embedding_dimensions, knowledge_bases.extraction_model, "
    "knowledge_bases.extraction_schema, knowledge_bases.source, knowledge_bases.trigger, "
    "knowledge_bases.pending_embedding_model, knowledge_bases.pending_embedding_dimensions, "
    "knowledge_bases.reindex_error, knowledge_bases.created_at, knowledge_bases.updated_at, "
    "knowledge_bases.chunk_size, knowledge_bases.chunk_overlap"
)
GET_KB = (
    f"SELECT {KB_COLUMNS} FROM knowledge_bases "
    "WHERE knowledge_bases.org_id = $1::VARCHAR AND knowledge_bases.id = $2::BIGINT"
)
LIST_FILES = (
    "SELECT knowledge_base_files.id, "
    "knowledge_base_files.knowledge_base_id, knowledge_base_files.file_id::text AS file_id, "
    "knowledge_base_files.file_name, knowledge_base_files.file_key, "
    "knowledge_base_files.content_key, knowledge_base_files.content_type, "
    "knowledge_base_files.file_size, knowledge_base_files.processing_status, "
    "knowledge_base_files.processing_error, knowledge_base_files.image_keys, "
    "knowledge_base_files.user_metadata, knowledge_base_files.extracted_data, "
    "knowledge_base_files.created_at, knowledge_base_files.updated_at "
    "FROM knowledge_base_files "
    "WHERE knowledge_base_files.org_id = $1::VARCHAR "
    "AND knowledge_base_files.knowledge_base_id = $2::BIGINT "
    "ORDER BY knowledge_base_files.created_at DESC, knowledge_base_files.id DESC"
)
LIST_FIRST_PAGE = LIST_FILES + " LIMIT $3"
LIST_NEXT_PAGE = (
    LIST_FILES.replace(
        "ORDER BY",
        "AND (knowledge_base_files.created_at, knowledge_base_files.id) < ($4, $5) ORDER BY",
    )
    + " LIMIT $3"
)
LIST_SUMMARIES = (
    f"SELECT {KB_COLUMNS}, coalesce(st.file_count, 0) AS file_count, "
    "coalesce(st.total_size, 0) AS total_size, st.last_file_uploaded_at, "
    "coalesce(st.files_in_progress, 0) AS files_in_progress "
    "FROM knowledge_bases LEFT JOIN knowledge_base_stats st "
    "ON st.knowledge_base_id = knowledge_bases.id AND st.org_id = $1::VARCHAR "
    "WHERE knowledge_bases.org_id = $1::VARCHAR "
    "ORDER BY knowledge_bases.created_at DESC, knowledge_bases.id DESC"
)


class Camel(msgspec.Struct, rename="camel"):
    pass


class FileOut(Camel):
    id: int
    knowledge_base_id: int
    file_id: str
    file_name: str
    file_key: str
    content_key: str
    content_type: str
    file_size: int | None
    processing_status: str
    processing_error: str | None
    image_keys: list[str] | None
    user_metadata: dict[str, Any] | None
    extracted_data: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime


class KnowledgeBaseOut(Camel):
    id: int
    name: str
    description: str
    embedding_model: str
    embedding_dimensions: int
    extraction_model: str | None
    extraction_schema: dict[str, Any] | None
    source: dict[str, Any] | None
    trigger: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    user_id: str
    file_count: int
    last_file_uploaded_at: datetime | None
    total_size: int
    status: str
    chunk_size: int
    chunk_overlap: int


class FileList(Camel, omit_defaults=True):
    success: bool
    files: list[FileOut]
    next_cursor: str | msgspec.UnsetType | None = msgspec.UNSET


class KnowledgeBaseList(Camel):
    success: bool
    knowledge_bases: list[KnowledgeBaseOut]


class ErrorBody(msgspec.Struct):
    error: str


encode = msgspec.json.Encoder().encode
pool: asyncpg.Pool | None = None


def _json(body: Any, status: int = 200) -> Response[bytes]:
    return Response(encode(body), media_type=MediaType.JSON, status_code=status)


def _file(r: asyncpg.Record) -> FileOut:
    return FileOut(
        id=r["id"],
        knowledge_base_id=r["knowledge_base_id"],
        file_id=r["file_id"],
        file_name=r["file_name"],
        file_key=r["file_key"],
        content_key=r["content_key"],
        content_type=r["content_type"],
        file_size=r["file_size"],
        processing_status=r["processing_status"],
        processing_error=r["processing_error"],
        image_keys=r["image_keys"],
        user_metadata=r["user_metadata"],
        extracted_data=r["extracted_data"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
    )


def _status(r: asyncpg.Record) -> str:
    if r["pending_embedding_model"] is not None:
        return "reindexing"
    if r["reindex_error"] is not None:
        return "error"
    return "processing" if r["files_in_progress"] else "ready"


def _knowledge_base(r: asyncpg.Record) -> KnowledgeBaseOut:
    return KnowledgeBaseOut(
        id=r["id"],
        name=r["name"],
        description=r["description"],
        embedding_model=r["embedding_model"],
        embedding_dimensions=r["embedding_dimensions"],
        extraction_model=r["extraction_model"],
        extraction_schema=r["extraction_schema"],
        source=r["source"],
        trigger=r["trigger"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        user_id=r["user_id"],
        file_count=r["file_count"],
        last_file_uploaded_at=r["last_file_uploaded_at"],
        total_size=int(r["total_size"]),
        status=_status(r),
        chunk_size=r["chunk_size"],
        chunk_overlap=r["chunk_overlap"],
    )


def _cursor(created_at: datetime, record_id: int) -> str:
    raw = msgspec.json.encode([created_at.isoformat(), record_id])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _after(cursor: str) -> tuple[datetime, int]:
    stamp, record_id = msgspec.json.decode(
        base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    )
    return datetime.fromisoformat(stamp), int(record_id)


@get("/kb/files")
async def list_files(
    kb_id: str | None = Parameter(query="kbId", default=None, required=False),
    limit: int | None = Parameter(query="limit", default=None, required=False),
    cursor: str | None = Parameter(query="cursor", default=None, required=False),
    org: str = Parameter(query="org", default=ORG_ID, required=False),
) -> Response[bytes]:
    if kb_id is None or not kb_id.isdigit() or int(kb_id) < 1:
        return _json(ErrorBody("Valid knowledge base ID is required"), 400)
    assert pool is not None
    async with pool.acquire() as conn:
        if await conn.fetchrow(GET_KB, org, int(kb_id)) is None:
            return _json(ErrorBody("Knowledge base not found"), 404)
        if limit is None:
            rows = await conn.fetch(LIST_FILES, org, int(kb_id))
            return _json(FileList(success=True, files=[_file(r) for r in rows]))
        if cursor:
            rows = await conn.fetch(LIST_NEXT_PAGE, org, int(kb_id), limit + 1, *_after(cursor))
        else:
            rows = await conn.fetch(LIST_FIRST_PAGE, org, int(kb_id), limit + 1)
    page = [_file(r) for r in rows[:limit]]
    after = _cursor(page[-1].created_at, page[-1].id) if len(rows) > limit else None
    return _json(FileList(success=True, files=page, next_cursor=after))


@get("/kb/manage")
async def list_knowledge_bases(
    org: str = Parameter(query="org", default=ORG_ID, required=False),
) -> Response[bytes]:
    assert pool is not None
    rows = await pool.fetch(LIST_SUMMARIES, org)
    return _json(
        KnowledgeBaseList(success=True, knowledge_bases=[_knowledge_base(r) for r in rows])
    )


def _encode_json(value: Any) -> str:
    return encode(value).decode()


async def _init_connection(conn: asyncpg.Connection) -> None:
    for name in ("json", "jsonb"):
        await conn.set_type_codec(
            name, schema="pg_catalog", encoder=_encode_json, decoder=msgspec.json.decode
        )


@asynccontextmanager
async def lifespan(_app: Litestar) -> AsyncIterator[None]:
    global pool  # noqa: PLW0603
    pool = await asyncpg.create_pool(
        host=os.environ["BENCH_PG_HOST"],
        user="postgres",
        database=os.environ.get("BENCH_PG_DATABASE", "agent_platform"),
        min_size=10,
        max_size=20,
        init=_init_connection,
    )
    try:
        yield
    finally:
        await pool.close()


app = Litestar(
    route_handlers=[list_files, list_knowledge_bases],
    lifespan=[lifespan],
    openapi_config=None,
    logging_config=None,
    debug=False,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, log_config=None, access_log=False)


if __name__ == "__main__":
    main()
