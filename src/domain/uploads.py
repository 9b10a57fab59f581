"""Rules for the signed-upload step and the signed downloads of stored files."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

DEFAULT_MAX_UPLOAD_SIZE = 100 * 1024 * 1024
DEFAULT_UPLOAD_URL_TTL = timedelta(minutes=15)
DOWNLOAD_URL_TTL = timedelta(minutes=5)

UPLOAD_ALREADY_USED = "This upload address has already been used"
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


class DownloadPart(StrEnum):
    """What `GET /kb/files/download` hands out: the uploaded original, the extracted text
    (`contentKey`) or one page image (`imageKeys`, pages from 1)."""

    ORIGINAL = "original"
    CONTENT = "content"
    IMAGE = "image"


def essence(content_type: str) -> str:
    """A MIME type without its parameters, lower-cased: `Text/Plain; charset=x` → `text/plain`."""
    return content_type.partition(";")[0].strip().lower()
