"""`Content-Disposition` for a download: an ASCII fallback name and the exact UTF-8 one."""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import quote


def attachment(file_name: str) -> str:
    """`attachment; filename="..."; filename*=UTF-8''...` (RFC 6266): the quoted name keeps
    printable ASCII only, without quotes or backslashes; the encoded one is the name as is."""
    ascii_name = unicodedata.normalize("NFKD", file_name).encode("ascii", "ignore").decode()
    fallback = re.sub(r'[^\x20-\x7e]|["\\]', "_", ascii_name).strip() or "download"
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(file_name, safe='')}"
