"""Files of a knowledge base, their processing states, and their storage keys."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from operator import attrgetter
from typing import Any

from domain.cursors import decode_cursor, encode_cursor, invalid_cursor
from domain.errors import Invalid, field_error
from domain.ids import parse_positive_id, parse_uuid
from domain.knowledge_bases import KB_ID_REQUIRED
from domain.text import check_storable, check_storable_json, has_invisible

FILE_FIELDS_REQUIRED = "File ID, name, file key, content key, and content type are required"
FILE_NOT_FOUND = "File not found"
FILE_ID_REQUIRED = "Valid file ID is required"
FILE_ID_INVALID = "File ID must be a UUID"
MAX_FILE_NAME = 255
MAX_CONTENT_TYPE = 255
CONTENT_TYPE_ESSENCE = (
    r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
)
"""A MIME type's `type/subtype` (RFC 6838's restricted names), without its parameters."""
CONTENT_TYPE_INVALID = "Content type must be a MIME type such as application/pdf"
FILE_NAME_INVALID = f"File name must be 1 to {MAX_FILE_NAME} printable characters"
FILE_SIZE_INVALID = "File size must be a non-negative integer"
CONTENT_NAME = "content.md"
RESERVED_NAMES = frozenset({CONTENT_NAME, "images"})
_CONTENT_TYPE = re.compile(f"^{CONTENT_TYPE_ESSENCE}$")


class ProcessingStatus(StrEnum):
    """`parsing → parsed → chunking → completed`; each `*_failed` ends processing with an error."""

    PARSING = "parsing"
    PARSED = "parsed"
    CHUNKING = "chunking"
    COMPLETED = "completed"
    PARSE_FAILED = "parse_failed"
    CHUNK_FAILED = "chunk_failed"
    EXTRACT_FAILED = "extract_failed"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset(
    {
        ProcessingStatus.COMPLETED,
        ProcessingStatus.PARSE_FAILED,
        ProcessingStatus.CHUNK_FAILED,
        ProcessingStatus.EXTRACT_FAILED,
    }
)


@dataclass(slots=True)
class KnowledgeBaseFile:
    """A file associated with a knowledge base, with where its bytes and text live.

    Neither frozen nor keyword-only: re-embedding or deleting a knowledge base builds one per
    file from rows in this field order, and a frozen dataclass's `__init__` costs about twice as
    much, a call with sixteen keywords about five times as much as one with positions.
    `ListFiles` (`GET /kb/files`, the CLI) builds none: its views come from the rows
    (`FILE_VIEW_FIELDS`). `ocr_pages` counts the pages its extraction read by OCR (scanned PDF
    pages, image frames): 0 until it is extracted."""

    id: int
    org_id: str
    knowledge_base_id: int
    file_id: str
    file_name: str
    file_key: str
    content_key: str
    content_type: str
    file_size: int | None
    processing_status: ProcessingStatus
    processing_error: str | None
    image_keys: list[str] | None
    user_metadata: dict[str, Any] | None
    extracted_data: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    ocr_pages: int = 0


FILE_VIEW_FIELDS = (
    "id", "knowledge_base_id", "file_id", "file_name", "file_key", "content_key",
    "content_type", "file_size", "processing_status", "processing_error", "image_keys",
    "user_metadata", "extracted_data", "created_at", "updated_at", "ocr_pages",
)  # fmt: skip
"""A file as the members of its organization see it, in this order: every field of
`KnowledgeBaseFile` but `org_id`, with the status as its text. A listing builds its caller's
view of each file from these values, given positionally (`FileRepository.list_views`)."""


_VIEW_VALUES = attrgetter(*FILE_VIEW_FIELDS)
_STATUS_AT = FILE_VIEW_FIELDS.index("processing_status")


def view_values(file: KnowledgeBaseFile) -> tuple[Any, ...]:
    """`file`'s values of `FILE_VIEW_FIELDS`, in that order (the status as its text)."""
    values: tuple[Any, ...] = _VIEW_VALUES(file)
    return (*values[:_STATUS_AT], file.processing_status.value, *values[_STATUS_AT + 1 :])


@dataclass(frozen=True, slots=True, kw_only=True)
class NewFile:
    """The validated fields of a file about to be associated with a knowledge base."""

    org_id: str
    knowledge_base_id: int
    file_id: str
    file_name: str
    file_key: str
    content_key: str
    content_type: str
    file_size: int | None
    user_metadata: dict[str, Any] | None

    @classmethod
    def parse(
        cls,
        *,
        org_id: str,
        kb_id: object,
        file_id: object,
        file_name: object,
        file_key: object,
        content_key: object,
        content_type: object,
        file_size: object = None,
        user_metadata: object = None,
    ) -> NewFile:
        """An association's fields (upload step 3, agent-platform-api.md §4.3), checked in this
        order:
        1. fileId, fileName, fileKey, contentKey and contentType are all present and non-empty,
           else 400 "File ID, name, file key, content key, and content type are required";
        2. kbId is a positive integer, else 400 "Valid knowledge base ID is required";
        3. fileId is a uuid; the name is a file name; the keys lie below `org_id`'s prefix and
           are the very keys `CreateUpload` issued for this fileId and fileName (derived again,
           never taken on trust); the content type, the size and the metadata are well-formed
           (400 naming each field)."""
        required = (file_id, file_name, file_key, content_key, content_type)
        if any(not isinstance(value, str) or not value.strip() for value in required):
            raise Invalid(FILE_FIELDS_REQUIRED)
        assert isinstance(file_key, str) and isinstance(content_key, str)
        assert isinstance(file_name, str) and isinstance(content_type, str)
        knowledge_base_id = parse_positive_id(kb_id, KB_ID_REQUIRED)
        uuid = parse_uuid(file_id, FILE_ID_INVALID)
        name = validate_file_name(file_name)
        own_file_key = _own_key(org_id, file_key, "fileKey")
        own_content_key = _own_key(org_id, content_key, "contentKey")
        issued_file_key, issued_content_key = storage_keys(org_id, uuid, name)
        _issued(own_file_key, issued_file_key, "fileKey")
        _issued(own_content_key, issued_content_key, "contentKey")
        return cls(
            org_id=org_id,
            knowledge_base_id=knowledge_base_id,
            file_id=uuid,
            file_name=name,
            file_key=own_file_key,
            content_key=own_content_key,
            content_type=validate_content_type(content_type),
            file_size=parse_file_size(file_size),
            user_metadata=parse_user_metadata(user_metadata),
        )


def parse_file_id(value: object) -> str:
    """A file's uuid, in lower case (400 "Valid file ID is required")."""
    return parse_uuid(value, FILE_ID_REQUIRED)


def _own_key(org_id: str, key: str, field: str) -> str:
    if not key.startswith(org_files_prefix(org_id)) or not is_safe_key(key):
        raise Invalid(
            f"{field} must be a storage key issued to your organization",
            [field_error(field, "outside the organization's storage")],
        )
    return key


def _issued(key: str, issued: str, field: str) -> None:
    if key != issued:
        raise Invalid(
            f"{field} is not the key issued for this fileId and fileName",
            [field_error(field, f"expected {issued}")],
        )


def parse_user_metadata(value: object) -> dict[str, Any] | None:
    """A file's metadata: absent, or a JSON object whose strings PostgreSQL can store."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise Invalid(
            "userMetadata must be an object", [field_error("userMetadata", "expected an object")]
        )
    check_storable_json(value, "userMetadata")
    return value


def org_files_prefix(org_id: str) -> str:
    """Every stored object of an organization's files lives below this prefix."""
    return f"orgs/{org_id}/files/"


def file_folder(org_id: str, file_id: str) -> str:
    """The folder holding one file's original, extracted text and page images."""
    return f"{org_files_prefix(org_id)}{file_id}/"


def storage_keys(org_id: str, file_id: str, file_name: str) -> tuple[str, str]:
    """The file key and content key handed out for an upload."""
    folder = file_folder(org_id, file_id)
    return f"{folder}{safe_file_name(file_name)}", f"{folder}{CONTENT_NAME}"


def safe_file_name(name: str) -> str:
    """A storage-safe version of a file name: ASCII letters, digits, `.`, `-` and `_`."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", ascii_name).strip("._")
    cleaned = re.sub(r"_+", "_", cleaned)[:120]
    # content.md is the extracted text's key and images/ the page images' folder: an original
    # of either name must not take their place.
    if not cleaned or cleaned in RESERVED_NAMES:
        cleaned = f"original_{cleaned}" if cleaned else "file"
    return cleaned


def is_safe_key(key: str) -> bool:
    """A storage key with no traversal, no absolute path, no backslash and no empty segment."""
    if not key or key.startswith("/") or "\\" in key or len(key) > 1024:
        return False
    parts = key.split("/")
    return all(part not in ("", ".", "..") for part in parts) and key.isprintable()


def validate_file_name(value: str) -> str:
    """A file name is 1 to 255 printable characters with no path separator.

    Surrounding spaces are dropped; a control character (NUL, newline, tab, ...), a bidi
    override or isolate or any other invisible format character anywhere is refused."""
    if has_invisible(value):
        raise Invalid(
            "File name must not contain control or invisible formatting characters",
            [field_error("fileName", "contains a control or formatting character")],
        )
    name = value.strip(" ")
    if not name.strip() or len(name) > MAX_FILE_NAME:
        raise Invalid(FILE_NAME_INVALID, [field_error("fileName", "invalid file name")])
    if "/" in name or "\\" in name:
        raise Invalid(
            "File name must not contain a path separator",
            [field_error("fileName", "contains / or \\")],
        )
    return check_storable(name, "fileName")


def validate_content_type(value: str) -> str:
    """A MIME type `type/subtype`; parameters such as `; charset=utf-8` are kept."""
    essence, _, params = value.partition(";")
    if (
        not _CONTENT_TYPE.match(essence.strip())
        or len(value) > MAX_CONTENT_TYPE
        or not value.isprintable()
    ):
        raise Invalid(CONTENT_TYPE_INVALID, [field_error("contentType", "invalid MIME type")])
    return essence.strip().lower() + (f";{params}" if params else "")


def parse_file_size(value: object) -> int | None:
    """A file size: absent, or a whole number of bytes from 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Invalid(
            FILE_SIZE_INVALID, [field_error("fileSize", "expected a non-negative integer")]
        )
    return value


def check_upload_size(size: int, max_size: int) -> int:
    """`size` when it is within the deployment's upload limit; 400 naming `fileSize` else."""
    if size > max_size:
        raise Invalid(
            f"File size exceeds the maximum upload size of {max_size} bytes",
            [field_error("fileSize", f"at most {max_size}")],
        )
    return size


MAX_FILE_PAGE = 1000
FILE_LIMIT_INVALID = f"limit must be an integer from 1 to {MAX_FILE_PAGE}"


def validate_file_page_limit(value: object) -> int | None:
    """A page size from 1 to 1000, or None when absent (then every file is listed)."""
    if value is None or value == "":
        return None
    try:
        limit = parse_positive_id(value, FILE_LIMIT_INVALID)
    except Invalid:
        limit = 0
    if not 1 <= limit <= MAX_FILE_PAGE:
        raise Invalid(FILE_LIMIT_INVALID, [field_error("limit", FILE_LIMIT_INVALID)])
    return limit


@dataclass(frozen=True, slots=True)
class FileCursor:
    """Where a page of a knowledge base's files ends: newest first by `created_at`, then by
    record id, so a page boundary is stable while files are added."""

    created_at: datetime
    record_id: int

    def encode(self) -> str:
        return encode_cursor([self.created_at.isoformat(), self.record_id])

    @staticmethod
    def decode(value: object) -> FileCursor | None:
        """None for an absent cursor; `Invalid` for one this service did not hand out."""
        if value is None or value == "":
            return None
        try:
            stamp, record_id = decode_cursor(value)
            created_at = datetime.fromisoformat(stamp)
        except (ValueError, TypeError):
            raise invalid_cursor() from None
        if created_at.tzinfo is None or not isinstance(record_id, int) or record_id < 1:
            raise invalid_cursor()
        return FileCursor(created_at, record_id)
