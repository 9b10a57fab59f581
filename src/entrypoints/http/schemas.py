"""Request and response bodies: msgspec Structs, camelCase on the wire."""

from __future__ import annotations

from datetime import datetime
from operator import attrgetter
from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from application.use_cases.create_upload import PreparedUpload
from domain.files import FILE_VIEW_FIELDS, KnowledgeBaseFile, view_values
from domain.ids import MAX_BIGINT, UUID_PATTERN
from domain.knowledge_bases import KnowledgeBaseSummary
from domain.models import (
    CHAT_PROVIDERS,
    EMBEDDING_PROVIDERS,
    MAX_EMBEDDING_DIMENSIONS,
)
from domain.text import INVISIBLE, SPACES, character_class
from domain.values import UNSET as DOMAIN_UNSET

PositiveId = Annotated[int, Meta(ge=1, le=MAX_BIGINT, description="A positive 64-bit integer id")]
Uuid = Annotated[str, Meta(pattern=UUID_PATTERN, extra_json_schema={"extra": {"format": "uuid"}})]
"""A uuid in the canonical 8-4-4-4-12 form (answered in lower case). Not `uuid.UUID`: msgspec
decodes that from forms the contract refuses (no dashes)."""

# Patterns the document states and the use cases enforce with their own messages (the decoder
# enforces only the simpler `pattern=r"\S"`, so that those messages stay the use cases'):
# a name or title is one line without control or bidirectional-control characters, and no
# stored text holds NUL.
_CONTROLS = r"\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069"
ONE_LINE = rf"^[^{_CONTROLS}]*[^\s{_CONTROLS}][^{_CONTROLS}]*$"
NO_NUL = r"^[^\u0000]*$"
NO_CONTROLS = rf"^[^{_CONTROLS}]*$"
# Python's `str.strip()` also drops U+001C to U+001F and U+0085, which `\s` leaves.
NOT_BLANK = r"^[^\u0000]*[^\s\u0000\u001c-\u001f\u0085][^\u0000]*$"
_NAME_REFUSED = character_class(INVISIBLE) + r"/\\"
FILE_NAME = rf"^ *[^\s{_NAME_REFUSED}]([^{_NAME_REFUSED}]*[^\s{_NAME_REFUSED}])? *$"
MIME_TYPE = (
    r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
    r"( *;[\u0020-\u007e]*)?$"
)


def documented(pattern: str, **more: object) -> dict[str, object]:
    """`extra_json_schema` that states `pattern` (and `more`) in the document only."""
    return {"extra": {"pattern": pattern, **more}}


def model_pattern(providers: tuple[str, ...]) -> str:
    """A `provider:model` string of one of `providers` (the use case checks the model)."""
    return rf"^({'|'.join(providers)}):[^{character_class(INVISIBLE, SPACES)}]{{1,200}}$"


EmbeddingModel = Annotated[
    str,
    Meta(
        description="provider:model, e.g. local:all-MiniLM-L6-v2",
        extra_json_schema=documented(model_pattern(EMBEDDING_PROVIDERS)),
    ),
]
ChatModel = Annotated[
    str,
    Meta(
        description="provider:model, e.g. local:smollm2-135m or openai:gpt-4o-mini",
        extra_json_schema=documented(model_pattern(CHAT_PROVIDERS)),
    ),
]
Dimensions = Annotated[int, Meta(ge=1, le=MAX_EMBEDDING_DIMENSIONS)]

# Litestar documents a list of constrained integers with plain integer items: say it again.
ID_ITEMS = {"extra": {"items": {"type": "integer", "minimum": 1, "maximum": MAX_BIGINT}}}


Text = Annotated[str, Meta(min_length=1, pattern=r"\S", extra_json_schema=documented(NOT_BLANK))]
"""A string with at least one non-blank character."""
Name = Annotated[
    str, Meta(min_length=1, max_length=200, pattern=r"\S", extra_json_schema=documented(ONE_LINE))
]
Description = Annotated[str, Meta(max_length=4000, extra_json_schema=documented(NO_NUL))]
ChunkSize = Annotated[int, Meta(ge=32, le=8192, description="Tokens per chunk")]
# `gt=-1` rather than `ge=0`: Litestar leaves a zero minimum out of the document.
ChunkOverlap = Annotated[
    int, Meta(gt=-1, description="Tokens shared by neighbouring chunks, less than half the size")
]
Size = Annotated[int, Meta(gt=-1, le=MAX_BIGINT, description="Bytes")]
FileName = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=255,
        pattern=r"\S",
        extra_json_schema=documented(FILE_NAME),
        description="Printable, without a path separator",
    ),
]
MimeType = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=255,
        pattern=r"\S",
        extra_json_schema=documented(MIME_TYPE, examples=["text/markdown"]),
    ),
]


class Camel(Struct, rename="camel", forbid_unknown_fields=False):
    pass


class Closed(Camel, forbid_unknown_fields=True):
    """A body part whose unknown keys are refused; documented with `additionalProperties:
    false` (`openapi.complete_document`)."""


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

Source = Annotated[
    Literal["email"],
    Meta(
        description='"email" gives the knowledge base an address (`inboundEmailAddress`) that '
        "turns each message sent to it into files; null removes it"
    ),
]


class CreateKnowledgeBaseBody(Camel):
    name: Name
    description: Description | None = None
    embedding_model: EmbeddingModel | None = None
    embedding_dimensions: Dimensions | None = None
    extraction_model: ChatModel | None = None
    extraction_schema: dict[str, Any] | None = None
    chunk_size: ChunkSize | None = None
    chunk_overlap: ChunkOverlap | None = None
    source: Source | None = None


class UpdateKnowledgeBaseBody(Camel):
    kb_id: PositiveId
    name: Name | UnsetType = UNSET
    description: Description | UnsetType | None = UNSET
    embedding_model: EmbeddingModel | UnsetType | None = UNSET
    embedding_dimensions: Dimensions | UnsetType | None = UNSET
    extraction_model: ChatModel | UnsetType | None = UNSET
    extraction_schema: dict[str, Any] | UnsetType | None = UNSET
    chunk_size: ChunkSize | UnsetType = UNSET
    chunk_overlap: ChunkOverlap | UnsetType = UNSET
    source: Source | UnsetType | None = UNSET


class KnowledgeBaseOut(Camel):
    id: int
    name: str
    description: str
    embedding_model: str
    embedding_dimensions: int
    extraction_model: str | None
    extraction_schema: dict[str, Any] | None
    source: str | None
    inbound_email_address: str | None
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
        return cls(*_KB_FIELDS(summary))

    @classmethod
    def of_all(cls, summaries: list[KnowledgeBaseSummary]) -> list[KnowledgeBaseOut]:
        return [cls(*_KB_FIELDS(summary)) for summary in summaries]


# The domain's attributes of the same names, in the struct's order: the entities are typed
# already, and a listing builds one struct per row (`convert(from_attributes=True)` checks
# each value again, at twice the cost).
_KB_FIELDS = attrgetter(*KnowledgeBaseOut.__struct_fields__)


class KnowledgeBaseResponse(Camel):
    success: bool
    knowledge_base: KnowledgeBaseOut


class KnowledgeBaseListResponse(Camel):
    success: bool
    knowledge_bases: list[KnowledgeBaseOut]


# Files


class AssociateFileBody(Camel):
    """Upload step 3 (spec 4.3): the six fields from steps 1 and 2 are required."""

    kb_id: PositiveId
    file_id: Uuid
    file_name: FileName
    file_key: Text
    content_key: Text
    content_type: MimeType
    file_size: Size | None = None
    user_metadata: dict[str, Any] | None = None


class KnowledgeBaseFileOut(Camel):
    """A file as its organization's members see it: the fields of `FILE_VIEW_FIELDS`, in that
    order, so that a listing builds it straight from the stored columns (`ListFilesQuery.view`).
    """

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
        return cls(*view_values(f))

    @classmethod
    def of_all(cls, files: list[KnowledgeBaseFile]) -> list[KnowledgeBaseFileOut]:
        return [cls(*view_values(f)) for f in files]


if KnowledgeBaseFileOut.__struct_fields__ != FILE_VIEW_FIELDS:
    raise TypeError(
        f"KnowledgeBaseFileOut's fields {KnowledgeBaseFileOut.__struct_fields__} are not "
        f"FILE_VIEW_FIELDS {FILE_VIEW_FIELDS}"
    )


class FileResponse(Camel):
    success: bool
    file: KnowledgeBaseFileOut


class FileListResponse(Camel, omit_defaults=True):
    success: bool
    files: list[KnowledgeBaseFileOut]
    # Only when a page was asked for (`limit`): the next page's cursor, null on the last.
    next_cursor: str | UnsetType | None = UNSET


class ReprocessBody(Camel):
    kb_id: PositiveId
    file_id: Uuid


class SearchBody(Camel):
    """One of `kbId` and `kbIds` names the knowledge bases searched."""

    query: Annotated[
        str,
        Meta(min_length=1, max_length=2000, pattern=r"\S", extra_json_schema=documented(NOT_BLANK)),
    ]
    kb_id: PositiveId | UnsetType = UNSET
    kb_ids: (
        Annotated[list[PositiveId], Meta(min_length=1, max_length=20, extra_json_schema=ID_ITEMS)]
        | UnsetType
    ) = UNSET
    top_k: Annotated[int, Meta(ge=1, le=50)] | None = None


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
    file_name: FileName
    content_type: MimeType
    file_size: Annotated[
        Size,
        Meta(
            description="The exact size in bytes, at most the deployment's upload limit (100 MiB "
            "by default); the upload address takes a body of this size only"
        ),
    ]


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
