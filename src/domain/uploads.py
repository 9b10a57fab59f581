"""Rules for the signed-upload step."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

DEFAULT_MAX_UPLOAD_SIZE = 100 * 1024 * 1024
DEFAULT_UPLOAD_URL_TTL = timedelta(minutes=15)


@dataclass(frozen=True, slots=True, kw_only=True)
class UploadPolicy:
    """How large an upload may be and how long its signed address stays valid."""

    max_size: int = DEFAULT_MAX_UPLOAD_SIZE
    url_ttl: timedelta = DEFAULT_UPLOAD_URL_TTL
