"""Knowledge bases, their files, the files' passages with embeddings (migrations 0001, 0002),
the parts a large file is embedded in (migration 0004), a knowledge base's e-mail address
(migration 0010) and its totals kept by a trigger (migration 0013)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from advanced_alchemy.mixins import IdentityPrimaryKey
from advanced_alchemy.types import JsonB
from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, Timestamps, now, org_column

PROCESSING_STATUSES = (
    "parsing",
    "parsed",
    "chunking",
    "completed",
    "parse_failed",
    "chunk_failed",
    "extract_failed",
)


SOURCE_CHECK = (
    "source IS NULL AND inbound_email_address IS NULL "
    "OR source = 'email' AND inbound_email_address IS NOT NULL"
)


class KnowledgeBaseModel(IdentityPrimaryKey, Timestamps, Base):
    """A knowledge base; one fed by e-mail (`source` 'email', migration 0010) has an address
    unique across organizations."""

    __tablename__ = "knowledge_bases"
    __table_args__ = (
        Index("ix_knowledge_bases_org", "org_id", "id"),
        CheckConstraint(SOURCE_CHECK, name="ck_knowledge_bases_source"),
    )

    org_id: Mapped[str] = org_column()
    user_id: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, server_default="")
    embedding_model: Mapped[str] = mapped_column(String(255))
    embedding_dimensions: Mapped[int] = mapped_column(Integer)
    extraction_model: Mapped[str | None] = mapped_column(String(255))
    extraction_schema: Mapped[dict[str, Any] | None] = mapped_column(JsonB)
    source: Mapped[str | None] = mapped_column(String(32))
    inbound_email_address: Mapped[str | None] = mapped_column(String(320), unique=True)
    trigger: Mapped[dict[str, Any] | None] = mapped_column(JsonB)
    pending_embedding_model: Mapped[str | None] = mapped_column(String(255))
    pending_embedding_dimensions: Mapped[int | None] = mapped_column(Integer)
    reindex_error: Mapped[str | None] = mapped_column(Text)
    chunk_size: Mapped[int] = mapped_column(Integer, server_default="256")
    chunk_overlap: Mapped[int] = mapped_column(Integer, server_default="32")
    language: Mapped[str] = mapped_column(String(32), server_default="english")


class KnowledgeBaseFileModel(IdentityPrimaryKey, Timestamps, Base):
    __tablename__ = "knowledge_base_files"
    __table_args__ = (
        UniqueConstraint("org_id", "file_id", name="uq_knowledge_base_files_org_file"),
        CheckConstraint(
            f"processing_status IN {PROCESSING_STATUSES!r}", name="ck_knowledge_base_files_status"
        ),
        Index("ix_knowledge_base_files_kb", "org_id", "knowledge_base_id", "created_at"),
    )

    org_id: Mapped[str] = org_column()
    knowledge_base_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("knowledge_bases.id", ondelete="CASCADE")
    )
    file_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    file_name: Mapped[str] = mapped_column(String(255))
    file_key: Mapped[str] = mapped_column(String(1024))
    content_key: Mapped[str] = mapped_column(String(1024))
    content_type: Mapped[str] = mapped_column(String(255))
    file_size: Mapped[int | None] = mapped_column(BigInteger)
    processing_status: Mapped[str] = mapped_column(String(32))
    processing_error: Mapped[str | None] = mapped_column(Text)
    image_keys: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    user_metadata: Mapped[dict[str, Any] | None] = mapped_column(JsonB)
    extracted_data: Mapped[dict[str, Any] | None] = mapped_column(JsonB)
    processing_attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    chunk_count: Mapped[int] = mapped_column(Integer, server_default="0")
    # Pages its extraction read by OCR (migration 0021).
    ocr_pages: Mapped[int] = mapped_column(Integer, server_default="0")


class KnowledgeBaseStatsModel(Base):
    """A knowledge base's totals, kept by a trigger on its files (`ap_roll_up_files`)."""

    __tablename__ = "knowledge_base_stats"

    knowledge_base_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("knowledge_bases.id", ondelete="CASCADE"), primary_key=True
    )
    org_id: Mapped[str] = org_column()
    file_count: Mapped[int] = mapped_column(BigInteger, server_default="0")
    total_size: Mapped[int] = mapped_column(BigInteger, server_default="0")
    files_in_progress: Mapped[int] = mapped_column(BigInteger, server_default="0")
    chunk_count: Mapped[int] = mapped_column(BigInteger, server_default="0")
    last_file_uploaded_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))


class ChunkModel(IdentityPrimaryKey, Base):
    """A passage of a file with its embedding. `embedding` has no fixed dimension count: each
    count has its own partial HNSW index, made by `ap_ensure_chunk_index` (migration 0002) when
    a knowledge base first uses it; those indexes are not declared here."""

    __tablename__ = "chunks"
    __table_args__ = (
        CheckConstraint("vector_dims(embedding) = dimensions", name="ck_chunks_dimensions"),
        Index("ix_chunks_scope", "org_id", "knowledge_base_id", "embedding_model"),
        Index("ix_chunks_file", "file_record_id", "embedding_model"),
        Index("ix_chunks_tsv", "tsv", postgresql_using="gin"),
    )

    org_id: Mapped[str] = org_column()
    knowledge_base_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("knowledge_bases.id", ondelete="CASCADE")
    )
    file_record_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("knowledge_base_files.id", ondelete="CASCADE")
    )
    embedding_model: Mapped[str] = mapped_column(String(255))
    dimensions: Mapped[int] = mapped_column(Integer)
    chunk_index: Mapped[int] = mapped_column(Integer)
    page_number: Mapped[int | None] = mapped_column(Integer)
    start_char: Mapped[int] = mapped_column(Integer)
    end_char: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    embedding: Mapped[Any] = mapped_column(Vector())
    # Written by the trigger `ap_chunk_text_search` (migration 0022) in the knowledge base's
    # language, with `term_count`, the words the passage counts for BM25.
    tsv: Mapped[Any] = mapped_column(TSVECTOR)
    term_count: Mapped[int] = mapped_column(Integer, server_default="0")
    created_at: Mapped[dt.datetime] = now()


class ChunkTermModel(Base):
    """One lexeme of a passage (the inverted index BM25 reads), written by the trigger
    `ap_chunk_terms` (migration 0022) from the passage's `tsv`."""

    __tablename__ = "chunk_terms"
    __table_args__ = (
        Index(
            "ix_chunk_terms_postings",
            "knowledge_base_id",
            "lexeme",
            postgresql_include=[
                "embedding_model",
                "org_id",
                "chunk_id",
                "tf",
                "dl",
                "file_record_id",
            ],
        ),
    )

    chunk_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("chunks.id", ondelete="CASCADE"), primary_key=True
    )
    lexeme: Mapped[str] = mapped_column(Text, primary_key=True)
    org_id: Mapped[str] = org_column()
    knowledge_base_id: Mapped[int] = mapped_column(BigInteger)
    embedding_model: Mapped[str] = mapped_column(String(255))
    file_record_id: Mapped[int] = mapped_column(BigInteger)
    tf: Mapped[int] = mapped_column(Integer)
    dl: Mapped[int] = mapped_column(Integer)


class EmbeddingPartModel(IdentityPrimaryKey, Base):
    """One part of a large file's passages, embedded by its own job."""

    __tablename__ = "embedding_parts"
    __table_args__ = (Index("ix_embedding_parts_file", "file_record_id", "done"),)

    org_id: Mapped[str] = org_column()
    file_record_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("knowledge_base_files.id", ondelete="CASCADE")
    )
    part: Mapped[int] = mapped_column(Integer)
    models: Mapped[Any] = mapped_column(JsonB)
    passages: Mapped[Any] = mapped_column(JsonB)
    starts: Mapped[int] = mapped_column(Integer, server_default="0")
    done: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))


class StagedChunkModel(Base):
    """A finished part's passage with its vector, not searchable until the file is published
    (no vector index: never searched)."""

    __tablename__ = "staged_chunks"
    __table_args__ = (
        PrimaryKeyConstraint("part_id", "embedding_model", "chunk_index"),
        Index("ix_staged_chunks_file", "file_record_id"),
    )

    part_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("embedding_parts.id", ondelete="CASCADE")
    )
    org_id: Mapped[str] = org_column()
    file_record_id: Mapped[int] = mapped_column(BigInteger)
    embedding_model: Mapped[str] = mapped_column(String(255))
    dimensions: Mapped[int] = mapped_column(Integer)
    chunk_index: Mapped[int] = mapped_column(Integer)
    page_number: Mapped[int | None] = mapped_column(Integer)
    start_char: Mapped[int] = mapped_column(Integer)
    end_char: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    embedding: Mapped[Any] = mapped_column(Vector())
