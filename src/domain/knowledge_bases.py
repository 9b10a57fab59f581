"""Knowledge bases: their fields, the rules for creating and changing them, and their status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from enum import StrEnum
from typing import Any

from domain.chunks import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    check_chunking,
    parse_chunk_overlap,
    parse_chunk_size,
)
from domain.errors import Invalid, field_error
from domain.ids import parse_positive_id
from domain.models import parse_dimensions, parse_embedding_model, validate_chat_model
from domain.text import check_storable_json, parse_line, parse_text
from domain.values import UNSET, Parser, Unset, field_values, parse_all, parse_sent

KB_NOT_FOUND = "Knowledge base not found"
KB_ID_REQUIRED = "Valid knowledge base ID is required"
MAX_NAME = 200
MAX_DESCRIPTION = 4000
EMAIL_SOURCE = "email"
"""The `source` of a knowledge base fed by e-mail (`domain.inbound_email`)."""
SOURCE_INVALID = 'source must be "email" or null'
DEFAULT_LANGUAGE = "english"
SEARCH_LANGUAGES: tuple[str, ...] = (
    "arabic", "armenian", "basque", "catalan", "danish", "dutch", "english", "estonian",
    "finnish", "french", "german", "greek", "hindi", "hungarian", "indonesian", "irish",
    "italian", "lithuanian", "nepali", "norwegian", "portuguese", "romanian", "russian",
    "serbian", "simple", "spanish", "swedish", "tamil", "turkish", "yiddish",
)  # fmt: skip
"""The languages a knowledge base's full-text search can stem in: the text-search
configurations of `pg_catalog` that PostgreSQL 18 ships (`SELECT cfgname FROM pg_ts_config`), a
snowball stemmer each, and `simple`, which lower-cases words without stemming them or dropping
stop words. A passage's `tsv` is written in its knowledge base's language (migration 0022)."""
LANGUAGE_INVALID = f"language must be one of: {', '.join(SEARCH_LANGUAGES)}"


class KnowledgeBaseStatus(StrEnum):
    """`ready`; `processing` while a file is not in a terminal state; `reindexing` while an
    embedding-model change is re-embedding its files; `error` when that re-embedding failed."""

    READY = "ready"
    PROCESSING = "processing"
    REINDEXING = "reindexing"
    ERROR = "error"


@dataclass(slots=True)
class KnowledgeBase:
    """A named collection of files of one organization, embedded with one model.

    Not keyword-only: a listing builds one per row from the row's columns in this order, and a
    call with twenty keywords costs about five times as much as one with positions."""

    id: int
    org_id: str
    user_id: str
    name: str
    description: str
    embedding_model: str
    embedding_dimensions: int
    extraction_model: str | None
    extraction_schema: dict[str, Any] | None
    source: str | None
    trigger: dict[str, Any] | None
    pending_embedding_model: str | None
    pending_embedding_dimensions: int | None
    reindex_error: str | None
    created_at: datetime
    updated_at: datetime
    chunk_size: int = DEFAULT_CHUNK_SIZE
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP
    inbound_email_address: str | None = None
    """The address that feeds it by e-mail, when `source` is `email`."""
    language: str = DEFAULT_LANGUAGE
    """The language its passages' full text is stemmed in (one of `SEARCH_LANGUAGES`)."""


@dataclass(slots=True)
class KnowledgeBaseSummary(KnowledgeBase):
    """A knowledge base with the figures computed from its files: its own fields, then the
    totals, in the order a listing's row has them (one object per row, read as it is by the
    response's conversion)."""

    file_count: int = 0
    total_size: int = 0
    last_file_uploaded_at: datetime | None = None
    files_in_progress: int = 0

    @classmethod
    def of(
        cls,
        kb: KnowledgeBase,
        *,
        file_count: int = 0,
        total_size: int = 0,
        last_file_uploaded_at: datetime | None = None,
        files_in_progress: int = 0,
    ) -> KnowledgeBaseSummary:
        """`kb` with these totals (an empty knowledge base's by default)."""
        own: dict[str, Any] = {name: getattr(kb, name) for name in _KNOWLEDGE_BASE_FIELDS}
        return cls(
            **own,
            file_count=file_count,
            total_size=total_size,
            last_file_uploaded_at=last_file_uploaded_at,
            files_in_progress=files_in_progress,
        )

    @property
    def knowledge_base(self) -> KnowledgeBase:
        """The knowledge base itself (the summary is one, with its totals)."""
        return self

    @property
    def status(self) -> KnowledgeBaseStatus:
        if self.pending_embedding_model is not None:
            return KnowledgeBaseStatus.REINDEXING
        if self.reindex_error is not None:
            return KnowledgeBaseStatus.ERROR
        if self.files_in_progress:
            return KnowledgeBaseStatus.PROCESSING
        return KnowledgeBaseStatus.READY


_KNOWLEDGE_BASE_FIELDS = tuple(f.name for f in fields(KnowledgeBase))


def validate_extraction_schema(value: object) -> dict[str, Any] | None:
    """An extraction schema is absent or a JSON Schema object describing an object; none of its
    strings, keys included, may hold NUL (PostgreSQL cannot store it)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise Invalid(
            "extractionSchema must be a JSON Schema object",
            [field_error("extractionSchema", "expected an object")],
        )
    schema = dict(value)
    declared = schema.get("type")
    if declared is not None and declared != "object":
        raise Invalid(
            "extractionSchema must describe an object (type: object)",
            [field_error("extractionSchema", "top-level type must be object")],
        )
    if "properties" in schema and not isinstance(schema["properties"], Mapping):
        raise Invalid(
            "extractionSchema properties must be an object",
            [field_error("extractionSchema", "properties must be an object")],
        )
    check_storable_json(schema, "extractionSchema")
    return schema


def validate_source(value: object) -> str | None:
    """A knowledge base's `source` is `"email"` (fed by e-mail) or null (no source)."""
    if value is None or value == EMAIL_SOURCE:
        return value
    raise Invalid(SOURCE_INVALID, [field_error("source", 'expected "email" or null')])


def parse_language(value: object) -> str:
    """A knowledge base's search language: one of `SEARCH_LANGUAGES`, in any case, answered in
    lower case (400 "language must be one of: …" otherwise, null included)."""
    if isinstance(value, str) and value.isascii() and value.lower() in SEARCH_LANGUAGES:
        return value.lower()
    raise Invalid(LANGUAGE_INVALID, [field_error("language", "expected a search language")])


def _language_or_default(value: object) -> str:
    return DEFAULT_LANGUAGE if value is None else parse_language(value)


def parse_kb_id(value: object) -> int:
    """A knowledge base's id: a positive 64-bit integer (400 "Valid knowledge base ID is
    required")."""
    return parse_positive_id(value, KB_ID_REQUIRED)


def _extraction_model(value: object) -> str | None:
    return None if value is None else validate_chat_model(value, field="extractionModel")


def _embedding_model_or_default(value: object) -> str | None:
    return None if value is None else parse_embedding_model(value)


def _or(default: int, parse: Parser) -> Parser:
    return lambda value: default if value is None else parse(value)


def validate_name(value: object) -> str:
    """A knowledge base's name: 1 to 200 characters after trimming, on one line (the title
    rule)."""
    return parse_line(value, field="name", label="Name", limit=MAX_NAME)


def validate_description(value: object) -> str:
    """A knowledge base's description: at most 4000 characters of storable text, trimmed;
    absent means empty."""
    return parse_text(value, field="description", label="Description", limit=MAX_DESCRIPTION)


KNOWLEDGE_BASE_FIELDS: Mapping[str, Parser] = {
    "name": validate_name,
    "description": validate_description,
    "embedding_model": _embedding_model_or_default,
    "embedding_dimensions": parse_dimensions,
    "extraction_schema": validate_extraction_schema,
    "chunk_size": _or(DEFAULT_CHUNK_SIZE, parse_chunk_size),
    "chunk_overlap": _or(DEFAULT_CHUNK_OVERLAP, parse_chunk_overlap),
    "source": validate_source,
    "extraction_model": _extraction_model,
    "language": _language_or_default,
}
"""A knowledge base's own fields and their rules, in the order a request's fields are checked:
the name is required, 1 to 200 characters on one line; the description is an optional text of
at most 4000; the embedding model (null: the deployment's default) names a known provider, and
a local one must be shipped; its dimension count, 1 to 4000, is checked against the model by
the use case; the extraction schema is a JSON Schema of an object; the chunk size is 32 to 8192
tokens (256 by default) and the overlap at least 0 (32 by default) and under half the size;
`source` is "email" or null; the extraction model is a chat model or null; the language is one
of `SEARCH_LANGUAGES` (english by default)."""

KNOWLEDGE_BASE_CHANGES: Mapping[str, Parser] = {
    "name": validate_name,
    "description": validate_description,
    "extraction_model": _extraction_model,
    "extraction_schema": validate_extraction_schema,
    "source": validate_source,
    "embedding_model": parse_embedding_model,
    "embedding_dimensions": parse_dimensions,
    "chunk_size": parse_chunk_size,
    "chunk_overlap": parse_chunk_overlap,
    "language": parse_language,
}
"""The same rules for a change, in the order a change has always checked them, but for the
model, the chunking and the language, which a change cannot null. How the model, the chunking,
the source and the language apply is the use case's to say, from the knowledge base as it is."""


def _overlap_under_half_the_size(values: Mapping[str, Any]) -> None:
    check_chunking(values["chunk_size"], values["chunk_overlap"])


@dataclass(frozen=True, slots=True, kw_only=True)
class KnowledgeBaseFields:
    """A new knowledge base's own fields, parsed; `embedding_model` None is the deployment's
    default model, `embedding_dimensions` None the model's own count."""

    name: str
    description: str = ""
    embedding_model: str | None = None
    embedding_dimensions: int | None = None
    extraction_schema: dict[str, Any] | None = None
    chunk_size: int = DEFAULT_CHUNK_SIZE
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP
    source: str | None = None
    extraction_model: str | None = None
    language: str = DEFAULT_LANGUAGE

    @classmethod
    def parse(cls, **raw: object) -> KnowledgeBaseFields:
        """The request's fields, each of `KNOWLEDGE_BASE_FIELDS` in turn (an absent one as
        null), the overlap checked against the size as soon as both are known."""
        then = {"chunk_overlap": _overlap_under_half_the_size}
        return cls(**parse_all(KNOWLEDGE_BASE_FIELDS, raw, then=then))


@dataclass(frozen=True, slots=True, kw_only=True)
class KnowledgeBaseChanges:
    """The fields a change sends, parsed (`KNOWLEDGE_BASE_CHANGES`); `UNSET` marks one not sent.
    How the model, the chunking, the source and the language apply depends on the knowledge base
    as it is (`UpdateKnowledgeBase`)."""

    name: str | Unset = UNSET
    description: str | Unset = UNSET
    embedding_model: str | Unset = UNSET
    embedding_dimensions: int | Unset | None = UNSET
    extraction_schema: dict[str, Any] | Unset | None = UNSET
    chunk_size: int | Unset = UNSET
    chunk_overlap: int | Unset = UNSET
    source: str | Unset | None = UNSET
    extraction_model: str | Unset | None = UNSET
    language: str | Unset = UNSET

    @classmethod
    def parse(cls, **raw: object) -> KnowledgeBaseChanges:
        """The request's fields that were sent, each by its rule."""
        return cls(**parse_sent(KNOWLEDGE_BASE_CHANGES, raw))


@dataclass(frozen=True, slots=True, kw_only=True)
class NewKnowledgeBase:
    """A knowledge base about to be created: its organization, its creator, its fields with the
    embedding model resolved, and its inbound address when its source is e-mail."""

    org_id: str
    user_id: str
    name: str
    description: str
    embedding_model: str
    embedding_dimensions: int
    extraction_model: str | None
    extraction_schema: dict[str, Any] | None
    chunk_size: int = DEFAULT_CHUNK_SIZE
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP
    source: str | None = None
    inbound_email_address: str | None = None
    language: str = DEFAULT_LANGUAGE

    @classmethod
    def of(
        cls,
        fields: KnowledgeBaseFields,
        *,
        org_id: str,
        user_id: str,
        embedding: tuple[str, int],
        inbound_email_address: str | None,
    ) -> NewKnowledgeBase:
        """The knowledge base `fields` describe, created by `user_id`, embedded with
        `embedding` (model, dimension count)."""
        model, dimensions = embedding
        return cls(
            **{
                **field_values(fields),
                "embedding_model": model,
                "embedding_dimensions": dimensions,
            },
            org_id=org_id,
            user_id=user_id,
            inbound_email_address=inbound_email_address,
        )
