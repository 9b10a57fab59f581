"""Knowledge bases: their fields, the rules for creating and changing them, and their status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from enum import StrEnum
from typing import Any

from domain.chunks import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE
from domain.errors import Invalid, field_error
from domain.models import CHAT_PROVIDERS, LOCAL_CHAT_MODELS, parse_model_ref
from domain.text import check_single_line, check_storable, check_storable_json

KB_NOT_FOUND = "Knowledge base not found"
KB_ID_REQUIRED = "Valid knowledge base ID is required"
MAX_NAME = 200
MAX_DESCRIPTION = 4000


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
    call with nineteen keywords costs about five times as much as one with positions."""

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


@dataclass(frozen=True, slots=True, kw_only=True)
class NewKnowledgeBase:
    """The validated fields of a knowledge base about to be created."""

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


def validate_name(value: object) -> str:
    """A name is a non-empty string of at most 200 characters after trimming, on one line,
    without control characters (the title rule, `domain.text.check_single_line`)."""
    if not isinstance(value, str) or not value.strip():
        raise Invalid("Name is required", [field_error("name", "must be a non-empty string")])
    name = value.strip()
    if len(name) > MAX_NAME:
        raise Invalid(
            f"Name must be at most {MAX_NAME} characters",
            [field_error("name", "too long")],
        )
    return check_single_line(name, "name")


def validate_description(value: object) -> str:
    """A description is a string of at most 4000 characters; absent means empty."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Invalid(
            "Description must be a string", [field_error("description", "expected a string")]
        )
    if len(value) > MAX_DESCRIPTION:
        raise Invalid(
            f"Description must be at most {MAX_DESCRIPTION} characters",
            [field_error("description", "too long")],
        )
    return check_storable(value, "description").strip()


def validate_extraction_model(value: object) -> str | None:
    """An extraction model is absent or a `provider:model` of a known chat provider."""
    if value is None:
        return None
    ref = parse_model_ref(value, field="extractionModel", providers=CHAT_PROVIDERS)
    if ref.provider == "local" and ref.model not in LOCAL_CHAT_MODELS:
        raise Invalid(
            f"Unknown local chat model '{ref.model}'; available: "
            + ", ".join(f"local:{m}" for m in LOCAL_CHAT_MODELS),
            [field_error("extractionModel", "unknown local model")],
        )
    return str(ref)


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
