"""Request and response bodies: msgspec Structs, camelCase on the wire."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from msgspec import UNSET, Struct, UnsetType, convert

from application.use_cases.create_upload import PreparedUpload
from domain.files import KnowledgeBaseFile
from domain.knowledge_bases import KnowledgeBaseSummary
from domain.values import UNSET as DOMAIN_UNSET

Loose = int | float | str | bool | None
"""An id as the client sent it; the use case decides whether it is valid, with the spec's
message."""


class Camel(Struct, rename="camel", forbid_unknown_fields=False):
    pass


def unset(value: Any) -> Any:
    """msgspec's UNSET as the domain's: a field the caller did not send."""
    return DOMAIN_UNSET if value is UNSET else value


class ErrorBody(Camel, omit_defaults=True):
    error: str
    details: list[dict[str, Any]] = []


class SuccessMessage(Camel):
    success: bool
    message: str


# Knowledge bases


class CreateKnowledgeBaseBody(Camel):
    name: str | None = None
    description: str | None = None
    embedding_model: str | None = None
    embedding_dimensions: int | None = None
    extraction_model: str | None = None
    extraction_schema: dict[str, Any] | None = None
    chunk_size: int | None = None
    chunk_overlap: int | None = None


class UpdateKnowledgeBaseBody(Camel):
    kb_id: Loose = None
    name: str | UnsetType | None = UNSET
    description: str | UnsetType | None = UNSET
    embedding_model: str | UnsetType | None = UNSET
    embedding_dimensions: int | UnsetType | None = UNSET
    extraction_model: str | UnsetType | None = UNSET
    extraction_schema: dict[str, Any] | UnsetType | None = UNSET
    chunk_size: int | UnsetType = UNSET
    chunk_overlap: int | UnsetType = UNSET


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

    @classmethod
    def of(cls, summary: KnowledgeBaseSummary) -> KnowledgeBaseOut:
        kb = summary.knowledge_base
        return cls(
            id=kb.id,
            name=kb.name,
            description=kb.description,
            embedding_model=kb.embedding_model,
            embedding_dimensions=kb.embedding_dimensions,
            extraction_model=kb.extraction_model,
            extraction_schema=kb.extraction_schema,
            source=kb.source,
            trigger=kb.trigger,
            created_at=kb.created_at,
            updated_at=kb.updated_at,
            user_id=kb.user_id,
            file_count=summary.file_count,
            last_file_uploaded_at=summary.last_file_uploaded_at,
            total_size=summary.total_size,
            status=summary.status.value,
            chunk_size=kb.chunk_size,
            chunk_overlap=kb.chunk_overlap,
        )


class KnowledgeBaseResponse(Camel):
    success: bool
    knowledge_base: KnowledgeBaseOut


class KnowledgeBaseListResponse(Camel):
    success: bool
    knowledge_bases: list[KnowledgeBaseOut]


# Files


class AssociateFileBody(Camel):
    kb_id: Loose = None
    file_id: str | None = None
    file_name: str | None = None
    file_key: str | None = None
    content_key: str | None = None
    content_type: str | None = None
    file_size: int | None = None
    user_metadata: dict[str, Any] | None = None


class KnowledgeBaseFileOut(Camel):
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

    @classmethod
    def of(cls, f: KnowledgeBaseFile) -> KnowledgeBaseFileOut:
        return convert(f, cls, from_attributes=True)

    @classmethod
    def of_all(cls, files: list[KnowledgeBaseFile]) -> list[KnowledgeBaseFileOut]:
        """The same conversion, in one call for a whole listing."""
        return convert(files, list[cls], from_attributes=True)  # type: ignore[valid-type]


class FileResponse(Camel):
    success: bool
    file: KnowledgeBaseFileOut


class FileListResponse(Camel):
    success: bool
    files: list[KnowledgeBaseFileOut]


class ReprocessBody(Camel):
    kb_id: Loose = None
    file_id: str | None = None


class SearchBody(Camel):
    kb_id: Loose | UnsetType = UNSET
    kb_ids: list[Loose] | UnsetType = UNSET
    query: str | None = None
    top_k: int | None = None


class SearchResultOut(Camel, omit_defaults=True):
    file_id: str
    file_name: str
    chunk_id: int
    text: str
    score: float
    knowledge_base_id: int
    page_number: int | None = None


class SearchResponse(Camel):
    success: bool
    results: list[SearchResultOut]


# Uploads


class PresignBody(Camel):
    file_name: str | None = None
    content_type: str | None = None
    file_size: int | None = None


class PresignResponse(Camel):
    success: bool
    upload_url: str
    method: str
    headers: dict[str, str]
    file_id: str
    file_key: str
    content_key: str
    expires_at: datetime

    @classmethod
    def of(cls, prepared: PreparedUpload) -> PresignResponse:
        return cls(
            success=True,
            upload_url=prepared.upload.url,
            method=prepared.upload.method,
            headers=prepared.upload.headers,
            file_id=prepared.file_id,
            file_key=prepared.file_key,
            content_key=prepared.content_key,
            expires_at=prepared.expires_at,
        )


class UploadReceipt(Camel):
    success: bool
    file_key: str
    size: int
