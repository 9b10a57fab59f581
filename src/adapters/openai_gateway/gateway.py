"""One OpenAI-compatible endpoint: its address, its key, the headers that carry the key, and
its error messages read and scrubbed so that they can be shown to a member."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
MAX_PROVIDER_MESSAGE = 300
_SECRET_LIKE = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-*]{6,}")
_URL = re.compile(r"\bhttps?://\S+", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ProviderError:
    """What the provider said went wrong: its error code (or type) and its message, scrubbed."""

    code: str
    message: str


class OpenAIGateway:
    """An OpenAI-compatible API at `base_url` (up to and including `/v1`), reached with `client`.

    `api_key`, when given, is sent as a bearer token and removed from every message read back
    from the provider. The `httpx` client is shared and owned by the caller; nothing here
    closes it. One gateway serves every chat model and embedder on the endpoint.
    """

    __slots__ = ("api_key", "base_url", "client")

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        base_url: str = DEFAULT_OPENAI_BASE_URL,
        api_key: str | None = None,
    ) -> None:
        self.client = client
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key or None

    @property
    def is_openai(self) -> bool:
        """Whether the endpoint is OpenAI's own API (which always needs a key)."""
        return urlsplit(self.base_url).hostname == "api.openai.com"

    def url(self, path: str) -> str:
        """The address of `path` (`chat/completions`, `embeddings`) on this endpoint."""
        return f"{self.base_url}/{path.lstrip('/')}"

    def headers(self, accept: str) -> dict[str, str]:
        headers = {"Accept": accept}
        if self.api_key is not None:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def provider_error(self, body: str) -> ProviderError:
        """The error in a response body: OpenAI's `{"error": {"message", "code"}}`, a bare
        `{"message"}` or `{"detail"}`, or plain text."""
        try:
            parsed: object = json.loads(body)
        except ValueError:
            parsed = body
        return self.error_in(parsed)

    def error_in(self, payload: object) -> ProviderError:
        """The error in an already parsed body (or the `error` member of a streamed chunk)."""
        error = payload.get("error", payload) if isinstance(payload, dict) else payload
        if isinstance(error, dict):
            code = error.get("code") or error.get("type") or ""
            message = error.get("message") or error.get("detail") or ""
            return ProviderError(str(code), self.scrub(str(message)))
        return ProviderError("", self.scrub(str(error)))

    def scrub(self, message: str) -> str:
        """`message` without anything resembling a credential or a URL, on one line, short."""
        if self.api_key is not None:
            message = message.replace(self.api_key, "[redacted]")
        message = _SECRET_LIKE.sub("[redacted]", message)
        message = _URL.sub("[link]", message)
        message = " ".join(message.split())
        if len(message) > MAX_PROVIDER_MESSAGE:
            message = message[: MAX_PROVIDER_MESSAGE - 3] + "..."
        return message
