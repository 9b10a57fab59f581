"""Request and response bodies of knowledge bases, their files, uploads and search: msgspec
Structs, camelCase, each request's `rules` giving its fields' messages from the domain's."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, UnsetType

from application.use_cases.create_upload import PreparedUpload
from application.use_cases.search_knowledge_base import RERANK_INVALID
from domain.chunks import (
    CHUNK_OVERLAP_INVALID,
    CHUNK_SIZE_INVALID,
    MAX_CHUNK_SIZE,
    MAX_QUERY,
    MAX_SEARCHED,
    MAX_TOP_K,
    MIN_CHUNK_SIZE,
    TOP_K_INVALID,
)
from domain.files import (
    FILE_FIELDS_REQUIRED,
    FILE_ID_INVALID,
    FILE_ID_REQUIRED,
    FILE_NAME_INVALID,
    FILE_SIZE_INVALID,
    FILE_VIEW_FIELDS,
    MAX_FILE_NAME,
    KnowledgeBaseFile,
    view_values,
)
from domain.ids import MAX_BIGINT
from domain.knowledge_bases import (
    KB_ID_REQUIRED,
    LANGUAGE_INVALID,
    MAX_DESCRIPTION,
    MAX_NAME,
    SEARCH_LANGUAGES,
    SOURCE_INVALID,
)
from domain.models import DIMENSIONS_INVALID, EMBEDDING_PROVIDERS, MAX_EMBEDDING_DIMENSIONS
from domain.search import FILTERS_INVALID, MAX_FILTER_CONDITIONS, MAX_FILTER_DEPTH
from domain.text import INVISIBLE, character_class, required
from domain.uploads import DEFAULT_MAX_UPLOAD_SIZE
from entrypoints.http.filter_schemas import FILTERS_JSON_SCHEMA
from entrypoints.http.rules import (
    ABSENT,
    NULL_OR_EMPTY,
    RANGE,
    Rule,
    required_rule,
    too_long_rule,
)
from entrypoints.http.schemas import (
    ID_ITEMS,
    NOT_BLANK,
    Camel,
    ChatModel,
    MimeType,
    PositiveId,
    Text,
    Uuid,
    documented,
    line,
    model_pattern,
    text,
)

_NAME_REFUSED = character_class(INVISIBLE) + r"/\\"
FILE_NAME = rf"^ *[^\s{_NAME_REFUSED}]([^{_NAME_REFUSED}]*[^\s{_NAME_REFUSED}])? *$"

Name = Annotated[str, line(MAX_NAME)]
Description = Annotated[str, text(MAX_DESCRIPTION)]
EmbeddingModel = Annotated[
    str,
    Meta(
        description="provider:model, e.g. local:all-MiniLM-L6-v2",
        extra_json_schema=documented(model_pattern(EMBEDDING_PROVIDERS)),
    ),
]
Dimensions = Annotated[int, Meta(ge=1, le=MAX_EMBEDDING_DIMENSIONS)]
ChunkSize = Annotated[
    int, Meta(ge=MIN_CHUNK_SIZE, le=MAX_CHUNK_SIZE, description="Tokens per chunk")
]
# `gt=-1` rather than `ge=0`: Litestar leaves a zero minimum out of the document.
ChunkOverlap = Annotated[
    int, Meta(gt=-1, description="Tokens shared by neighbouring chunks, less than half the size")
]
Size = Annotated[int, Meta(gt=-1, le=MAX_BIGINT, description="Bytes")]
FileName = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=MAX_FILE_NAME,
        pattern=r"\S",
        extra_json_schema=documented(FILE_NAME),
        description="Printable, without a path separator",
    ),
]
SIZE_RULE = Rule("fileSize", FILE_SIZE_INVALID, detail="expected a non-negative integer")
FIELD_RULES = (
    too_long_rule("name", "Name", MAX_NAME),
    too_long_rule("description", "Description", MAX_DESCRIPTION),
    Rule("chunkSize", CHUNK_SIZE_INVALID, RANGE, "out of range"),
    Rule("embeddingDimensions", DIMENSIONS_INVALID, RANGE, "out of range"),
    Rule("chunkOverlap", CHUNK_OVERLAP_INVALID, RANGE, "out of range"),
    Rule("source", SOURCE_INVALID, detail='expected "email" or null'),
    Rule("language", LANGUAGE_INVALID, detail="expected a search language"),
)

# Knowledge bases

Source = Annotated[
    Literal["email"],
    Meta(
        description='"email" gives the knowledge base an address (`inboundEmailAddress`) that '
        "turns each message sent to it into files; null removes it"
    ),
]
# The document lists the names in lower case; any case is accepted (`parse_language`). The
# enum holds null for the creation's `language: null`; a change's type still refuses it.
Language = Annotated[
    str,
    Meta(
        description="The language full-text search stems words in (english by default; simple "
        "stems none); changing it re-indexes the knowledge base's passages",
        extra_json_schema={"extra": {"enum": [*SEARCH_LANGUAGES, None]}},
    ),
]


class CreateKnowledgeBaseBody(Camel):
    rules = (required_rule("name", "Name"), *FIELD_RULES)

    name: Name
    description: Description | None = None
    embedding_model: EmbeddingModel | None = None
    embedding_dimensions: Dimensions | None = None
    extraction_model: ChatModel | None = None
    extraction_schema: dict[str, Any] | None = None
    chunk_size: ChunkSize | None = None
    chunk_overlap: ChunkOverlap | None = None
    source: Source | None = None
    language: Language | None = None


class UpdateKnowledgeBaseBody(Camel):
    rules = (
        Rule("kbId", KB_ID_REQUIRED),
        required_rule("name", "Name", NULL_OR_EMPTY),
        *FIELD_RULES,
    )

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
    language: Language | UnsetType = UNSET


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
    language: str


class KnowledgeBaseResponse(Camel):
    success: bool
    knowledge_base: KnowledgeBaseOut


class KnowledgeBaseListResponse(Camel):
    success: bool
    knowledge_bases: list[KnowledgeBaseOut]


# Files


class AssociateFileBody(Camel):
    """Upload step 3 (agent-platform-api.md §4.3): the six fields from steps 1 and 2 are
    required."""

    rules = (
        *(
            Rule(f, FILE_FIELDS_REQUIRED, frozenset({"missing", "null", "empty", "type"}))
            for f in ("fileId", "fileName", "fileKey", "contentKey", "contentType")
        ),
        Rule("kbId", KB_ID_REQUIRED),
        Rule("fileId", FILE_ID_INVALID),
        Rule("fileName", FILE_NAME_INVALID, RANGE, "invalid file name"),
        SIZE_RULE,
    )

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
    # Pages read by OCR: scanned PDF pages (no text layer) and image frames.
    ocr_pages: int

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
    rules = (Rule("kbId", KB_ID_REQUIRED), Rule("fileId", FILE_ID_REQUIRED))

    kb_id: PositiveId
    file_id: Uuid


class SearchBody(Camel):
    """One of `kbId` and `kbIds` names the knowledge bases searched."""

    rules = (
        Rule("kbId", KB_ID_REQUIRED, detail="a positive integer"),
        Rule("kbIds", KB_ID_REQUIRED, detail=f"1 to {MAX_SEARCHED} ids"),
        Rule("query", required("query"), ABSENT, "a non-empty string"),
        too_long_rule("query", "query", MAX_QUERY),
        Rule("topK", TOP_K_INVALID, detail="out of range"),
        Rule("filters", FILTERS_INVALID, detail="an object"),
        Rule("rerank", RERANK_INVALID, detail="expected a boolean"),
    )

    query: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=MAX_QUERY,
            pattern=r"\S",
            extra_json_schema=documented(NOT_BLANK),
        ),
    ]
    kb_id: PositiveId | UnsetType = UNSET
    kb_ids: (
        Annotated[
            list[PositiveId],
            Meta(min_length=1, max_length=MAX_SEARCHED, extra_json_schema=ID_ITEMS),
        ]
        | UnsetType
    ) = UNSET
    top_k: Annotated[int, Meta(ge=1, le=MAX_TOP_K)] | None = None
    filters: (
        Annotated[
            dict[str, Any],
            Meta(
                extra_json_schema=FILTERS_JSON_SCHEMA,
                description="Limits the search to the files that match: `{key, op, value}` "
                "(op one of eq, ne, gt, gte, lt, lte, in, nin; key a file field — fileId, "
                "fileName, contentType, fileSize, createdAt — or a key of the file's "
                "userMetadata, `userMetadata.<key>` to be explicit) or `{and: [...]}` / "
                f"`{{or: [...]}}`, nested at most {MAX_FILTER_DEPTH} deep, at most "
                f"{MAX_FILTER_CONDITIONS} conditions.",
            ),
        ]
        | None
    ) = None
    rerank: (
        Annotated[
            bool,
            Meta(
                description="Order the best fused passages with the deployment's reranker "
                "(default: when one is configured; true without one is 400). The response's "
                "`X-Rerank` header says `applied`, `failed` (the fused order) or `off`."
            ),
        ]
        | None
    ) = None


class HighlightOut(Camel):
    """Where one of the query's terms stands in `text`: characters `start` to `end`
    (exclusive)."""

    start: int
    end: int


class SearchResultOut(Camel, omit_defaults=True):
    file_id: str
    file_name: str
    chunk_id: int
    text: str
    score: float
    knowledge_base_id: int
    highlights: list[HighlightOut]
    page_number: int | None = None


class SearchResponse(Camel):
    success: bool
    results: list[SearchResultOut]


# Uploads


class PresignBody(Camel):
    rules = (
        Rule("fileName", required("fileName"), ABSENT, "required"),
        Rule("contentType", required("contentType"), ABSENT, "required"),
        Rule("fileSize", required("fileSize"), ABSENT, "required"),
        SIZE_RULE,
    )

    file_name: FileName
    content_type: MimeType
    file_size: Annotated[
        Size,
        Meta(
            description="The exact size in bytes, at most the deployment's upload limit "
            f"({DEFAULT_MAX_UPLOAD_SIZE // 2**20} MiB "
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
