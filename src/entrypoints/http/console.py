"""The web console's files at `/console/`: the built single-page app (`console/dist`, or the
copy a wheel carries), its client-side routes, `config.json`, and the headers every console
answer carries.

What is served is looked up in the folder at each request (a rebuild is seen at once) and kept
in memory with its gzip form, made once per file version: the files are few, small and fixed.
A path names a file only if it resolves inside the folder (no `..`, no hidden name, no NUL, no
symbolic link out). Hashed assets (`assets/`) are cached for a year; everything else,
`index.html` first, is revalidated (`no-cache`, with an `ETag`). A path without an extension is
a client-side route and gets `index.html`; a missing file with one is a 404. Without a build
(no `index.html`) the pages answer 503 with a page saying how to build it.

The Content-Security-Policy allows scripts and styles from the service only (no inline script,
no `eval`), the OpenID provider's origin for the console's sign-in, and the object store's
origin for uploads sent straight to it. Compression is the console's alone: the API's answers
(event streams among them) are never compressed.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import mimetypes
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import structlog
from litestar import asgi
from litestar.enums import ScopeType
from litestar.response.base import ASGIResponse
from litestar.types import Receive, Scope, Send

from adapters.storage.s3 import signed_address_origin
from entrypoints.config import Settings

log = structlog.get_logger("agent_platform.http.console")

CONSOLE = "/console"
SIGN_IN = f"{CONSOLE}/sign-in"
TEMPLATE = f"{CONSOLE}/{{path:path}}"
CONFIG = "config.json"
ASSETS = "assets"
INDEX = "index.html"
BUILD_COMMAND = "make console"
NPM_BUILD_COMMAND = "npm ci --prefix console && npm run build --prefix console"
IMMUTABLE = "public, max-age=31536000, immutable"
NO_CACHE = "no-cache"
NO_STORE = "no-store"
# The copy a wheel carries (hatch_build.py puts console/dist there), else the repository's
# build beside the sources (an editable install): src/entrypoints/http -> the repository.
PACKAGED = Path(__file__).resolve().parent / "console_dist"
SOURCE = Path(__file__).resolve().parents[3] / "console" / "dist"
MAX_FILE_BYTES = 32 * 1024 * 1024
MIN_GZIP_BYTES = 256
MAX_CACHED_FILES = 4096
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".webmanifest": "application/manifest+json",
    ".txt": "text/plain; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".webp": "image/webp",
    ".jpg": "image/jpeg",
    ".woff2": "font/woff2",
    ".woff": "font/woff",
    ".wasm": "application/wasm",
}
COMPRESSIBLE = ("text/", "application/json", "application/manifest+json", "image/svg+xml")
COMPRESSIBLE_MORE = ("image/x-icon", "application/wasm", "font/ttf")
NOT_BUILT_PAGE = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Console not built</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body><h1>The console is not built</h1>
<p>Build it with <code>{BUILD_COMMAND}</code> (or <code>{NPM_BUILD_COMMAND.replace("&", "&amp;")}
</code>) in the repository, then reload this page. The API works meanwhile.</p>
</body></html>
""".encode()


def default_folder() -> Path:
    """The packaged build when there is one (a wheel), else the repository's `console/dist`."""
    return PACKAGED if PACKAGED.is_dir() else SOURCE


def _origin(url: str | None) -> str | None:
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def issuer_origin(settings: Settings) -> str | None:
    """The external OpenID provider's origin (none with the development provider)."""
    return None if settings.dev_identity else _origin(settings.auth_issuer)


def storage_origin(settings: Settings) -> str | None:
    """Where the browser sends an upload when it is not this service: the S3 store's signed
    addresses, or the public address local storage signs (when it is set)."""
    if settings.storage != "s3":
        return _origin(settings.public_url)
    assert settings.s3_bucket
    try:
        return signed_address_origin(
            bucket=settings.s3_bucket,
            endpoint_url=settings.s3_endpoint_url,
            region=settings.s3_region,
            path_style=settings.s3_path_style,
        )
    except Exception as error:  # botocore refused the settings: the store will say so itself
        log.warning("console.storage_origin_unknown", error=f"{type(error).__name__}: {error}")
        return _origin(settings.s3_endpoint_url)


def content_security_policy(settings: Settings) -> str:
    issuer = issuer_origin(settings)
    connect = dict.fromkeys(o for o in ("'self'", issuer, storage_origin(settings)) if o)
    forms = dict.fromkeys(o for o in ("'self'", issuer) if o)
    return "; ".join(
        (
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' blob: data:",
            f"connect-src {' '.join(connect)}",
            "frame-src 'self'",
            "frame-ancestors 'none'",
            "base-uri 'none'",
            f"form-action {' '.join(forms)}",
            "object-src 'none'",
        )
    )


def security_headers(csp: str) -> dict[str, str]:
    return {
        "Content-Security-Policy": csp,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
    }


def console_config(settings: Settings) -> dict[str, Any]:
    """`GET /console/config.json`: how the console signs people in."""
    if settings.dev_identity:
        return {"identityProvider": "development", "oidc": None}
    if settings.console_oidc_client_id:
        oidc = {
            "authority": settings.auth_issuer,
            "clientId": settings.console_oidc_client_id,
            "scope": settings.console_oidc_scope,
        }
        return {"identityProvider": "oidc", "oidc": oidc}
    return {"identityProvider": "external", "oidc": None}


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes = b""

    def response(self, *, head: bool) -> ASGIResponse:
        """The ASGI response; a HEAD one with the same headers and no body."""
        headers = {**self.headers}
        if self.status not in (204, 304):
            headers["Content-Length"] = str(len(self.body))
        return ASGIResponse(
            body=b"" if head else self.body,
            status_code=self.status,
            headers=headers,
            is_head_response=head,
            media_type=headers.get("Content-Type"),
        )


@dataclass(frozen=True, slots=True)
class _File:
    stamp: tuple[int, int, int]  # inode, size, modification time: a rebuild changes it
    content_type: str
    body: bytes
    gzipped: bytes | None
    etag: str


def _read(path: str, stamp: tuple[int, int, int]) -> _File:
    with open(path, "rb") as handle:
        body = handle.read(MAX_FILE_BYTES + 1)
    suffix = os.path.splitext(path)[1].lower()
    kind = TYPES.get(suffix) or mimetypes.guess_type(path)[0] or "application/octet-stream"
    gzipped = None
    if len(body) >= MIN_GZIP_BYTES and kind.startswith(COMPRESSIBLE + COMPRESSIBLE_MORE):
        packed = gzip.compress(body, compresslevel=9, mtime=0)
        gzipped = packed if len(packed) < len(body) else None
    digest = hashlib.sha256(body).hexdigest()[:32]
    return _File(stamp, kind, body, gzipped, f'"{digest}"')


def accepts_gzip(header: str) -> bool:
    """Whether an `Accept-Encoding` value takes gzip (named, or `*`, with a q above 0)."""
    weights: dict[str, float] = {}
    for item in header.split(","):
        name, _, parameters = item.partition(";")
        weight = 1.0
        for parameter in parameters.split(";"):
            key, _, value = parameter.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        weights.setdefault(name.strip().lower(), weight)
    weight = weights.get("gzip", weights.get("x-gzip", weights.get("*", 0.0)))
    return weight > 0


def _safe(relative: str) -> bool:
    """A path below the folder that names nothing outside it: no NUL or control character, no
    backslash, no empty, `.`, `..` or hidden segment (the last may be empty: `chat/`)."""
    if any(ord(c) < 32 or c in "\\\x7f" for c in relative):
        return False
    *parents, last = relative.split("/")
    return all(s and not s.startswith(".") for s in parents) and not last.startswith(".")


@dataclass
class ConsoleSite:
    """What `/console/` answers, from `folder`."""

    folder: Path
    csp: str
    config: bytes
    _files: dict[str, _File] = field(default_factory=dict)

    @classmethod
    def for_settings(cls, settings: Settings) -> ConsoleSite:
        return cls(
            folder=settings.console_dir or default_folder(),
            csp=content_security_policy(settings),
            config=json.dumps(console_config(settings)).encode(),
        )

    @property
    def built(self) -> bool:
        return (self.folder / INDEX).is_file()

    def headers(self, content_type: str, cache: str) -> dict[str, str]:
        return {"Content-Type": content_type, "Cache-Control": cache, **security_headers(self.csp)}

    def answer(
        self, method: str, raw_path: bytes, query: bytes, headers: Iterable[tuple[bytes, bytes]]
    ) -> Reply:
        """The reply to `method` on `raw_path` (as sent, percent-encoded) with `query`."""
        if method not in ("GET", "HEAD"):
            if method == "OPTIONS":
                return Reply(204, {"Allow": "GET, HEAD, OPTIONS", **security_headers(self.csp)})
            if raw_path.rstrip(b"/") == SIGN_IN.encode():  # no sign-in here: not a route
                return self._error(404, "Not Found")
            return self._error(405, "Method Not Allowed", Allow="GET, HEAD")
        try:
            path = unquote(raw_path.decode("ascii"), errors="strict")
        except UnicodeError:
            return self._error(404, "Not Found")
        if path == CONSOLE:
            target = f"{CONSOLE}/" + (f"?{query.decode('latin-1')}" if query else "")
            return Reply(308, {**self.headers("text/plain", NO_CACHE), "Location": target})
        relative = path.removeprefix(f"{CONSOLE}/")
        if relative == path or not _safe(relative):
            return self._error(404, "Not Found")
        if relative == CONFIG:
            return Reply(200, self.headers("application/json", NO_CACHE), self.config)
        wanted = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in headers}
        found = self._file(relative) if relative and not relative.endswith("/") else None
        top, _, _ = relative.partition("/")
        if found is not None:
            return self._send(found, IMMUTABLE if top == ASSETS else NO_CACHE, wanted)
        last = relative.rpartition("/")[2]
        if top == ASSETS or "." in last:
            return self._error(404, "Not Found")
        return self.index(wanted)

    def index(self, wanted: Mapping[str, str]) -> Reply:
        """`index.html`, revalidated at each use; 503 with how to build it when it is not."""
        found = self._file(INDEX)
        if found is None:
            return Reply(503, self.headers("text/html; charset=utf-8", NO_STORE), NOT_BUILT_PAGE)
        return self._send(found, NO_CACHE, wanted)

    def _send(self, found: _File, cache: str, wanted: Mapping[str, str]) -> Reply:
        headers = self.headers(found.content_type, cache)
        body, etag = found.body, found.etag
        if found.gzipped is not None:
            headers["Vary"] = "Accept-Encoding"
            if accepts_gzip(wanted.get("accept-encoding", "")):
                body, etag = found.gzipped, f'{found.etag[:-1]}-gzip"'
                headers["Content-Encoding"] = "gzip"
        headers["ETag"] = etag
        tags = {t.strip().removeprefix("W/") for t in wanted.get("if-none-match", "").split(",")}
        if etag in tags or "*" in tags:
            return Reply(304, headers)
        return Reply(200, headers, body)

    def _error(self, status: int, message: str, **more: str) -> Reply:
        body = json.dumps({"error": message}).encode()
        return Reply(status, {**self.headers("application/json", NO_STORE), **more}, body)

    def _file(self, relative: str) -> _File | None:
        """The file `relative` names inside the folder, from memory while it is unchanged."""
        root = os.path.realpath(self.folder)
        path = os.path.realpath(os.path.join(root, relative))
        if not path.startswith(root + os.sep):  # `..`, or a symbolic link out of the folder
            return None
        try:
            status = os.stat(path)
        except (OSError, ValueError):
            return None
        if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_FILE_BYTES:
            return None
        stamp = (status.st_ino, status.st_size, status.st_mtime_ns)
        cached = self._files.get(path)
        if cached is not None and cached.stamp == stamp:
            return cached
        try:
            found = _read(path, stamp)
        except OSError:
            return None
        if len(self._files) >= MAX_CACHED_FILES:
            self._files.clear()
        self._files[path] = found
        return found


def site_of(scope: Scope) -> ConsoleSite:
    site: ConsoleSite = scope["app"].state.console
    return site


@asgi(CONSOLE, is_mount=True, copy_scope=False, include_in_schema=False)
async def console_files(scope: Scope, receive: Receive, send: Send) -> None:
    """Everything under `/console` but the routes of its own (`controllers.console`). The
    scope is shared, not copied: its route template, which the access log and the metrics
    read, becomes one for the whole mount (Litestar's names each path: one series each)."""
    scope["path_template"] = TEMPLATE
    if scope["type"] != ScopeType.HTTP:  # a WebSocket: the console has none
        await send({"type": "websocket.close", "code": 1008, "reason": ""})
        return
    raw_path = scope.get("raw_path") or f"{CONSOLE}{scope['path']}".encode()
    method = scope["method"]
    reply = site_of(scope).answer(
        method, raw_path.split(b"?", 1)[0], scope.get("query_string", b""), scope["headers"]
    )
    await reply.response(head=method == "HEAD")(scope, receive, send)
