"""Rules for the signed-upload step and the signed downloads of stored files."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

DEFAULT_MAX_UPLOAD_SIZE = 100 * 1024 * 1024
DEFAULT_UPLOAD_URL_TTL = timedelta(minutes=15)
DOWNLOAD_URL_TTL = timedelta(minutes=5)

UPLOAD_ALREADY_USED = "This upload address has already been used"
UPLOAD_NOT_ISSUED = "This upload was not issued by POST /upload/presigned"
UPLOAD_FILE_DELETED = "The file this upload was issued for has been deleted"
ALREADY_ASSOCIATED = "This file is already associated with a knowledge base"
PURGE_MARGIN = timedelta(hours=1)
"""How long after a deleted file's upload address expires its folder is emptied once more: S3
takes a PUT whose request began before the expiry however long its body takes, and the
bucket's clock may run behind ours."""
_UPLOAD_KEY = re.compile(r"orgs/([^/]+)/files/([0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12})/[^/]+")
NOT_UPLOADED = "The file has not been uploaded yet"
CONTENT_NOT_FOUND = "File content not found"
PAGE_IMAGE_NOT_FOUND = "Page image not found"
PART_INVALID = "part must be one of original, content, image"
PAGE_INVALID = "page must be a positive integer, and only with part=image"
MAX_PAGE_NUMBER = 100_000
"""The highest page a download may name (page images are numbered from 1)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UploadPolicy:
    """How large an upload may be and how long its signed address stays valid."""

    max_size: int = DEFAULT_MAX_UPLOAD_SIZE
    url_ttl: timedelta = DEFAULT_UPLOAD_URL_TTL


class UploadState(StrEnum):
    """What became of an issued upload's file: `issued` (no record yet), `associated` (in a
    knowledge base), `deleted` (its record is gone; its address must store nothing more)."""

    ISSUED = "issued"
    ASSOCIATED = "associated"
    DELETED = "deleted"


@dataclass(frozen=True, slots=True, kw_only=True)
class IssuedUpload:
    """A signed upload address handed out for one file id and key, and its file's state."""

    org_id: str
    file_id: str
    file_key: str
    content_type: str
    expires_at: datetime
    state: UploadState = UploadState.ISSUED


def upload_key_owner(key: str) -> tuple[str, str] | None:
    """The organization and file id of an upload's key (`orgs/<org>/files/<fileId>/<name>`),
    or None for a key of another form."""
    match = _UPLOAD_KEY.fullmatch(key)
    return (match[1], match[2]) if match else None


class DownloadPart(StrEnum):
    """What `GET /kb/files/download` hands out: the uploaded original, the extracted text
    (`contentKey`) or one page image (`imageKeys`, pages from 1)."""

    ORIGINAL = "original"
    CONTENT = "content"
    IMAGE = "image"


def essence(content_type: str) -> str:
    """A MIME type without its parameters, lower-cased: `Text/Plain; charset=x` → `text/plain`."""
    return content_type.partition(";")[0].strip().lower()
