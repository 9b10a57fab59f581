from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from application.ports.chat_model import CallMeter


class StructuredExtractionFailed(Exception):
    """The model could not fill the schema; `message` is shown to the file's owner."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class StructuredExtractor(Protocol):
    """Asks a chat model (`provider:model`) to fill a JSON Schema from a document's text.

    The result is validated against the schema before it is returned. Raises
    `StructuredExtractionFailed` when the schema is not a valid JSON Schema, the model is
    unavailable, or its answer is not JSON that matches the schema (after retrying transient
    provider errors). Never blocks the event loop.
    """

    async def extract(
        self,
        *,
        model: str,
        schema: Mapping[str, Any],
        text: str,
        file_name: str,
        meter: CallMeter,
    ) -> dict[str, Any]:
        """The extracted object; each model call goes through `meter` (which may refuse it)."""
        ...
