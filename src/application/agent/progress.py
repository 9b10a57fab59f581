from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from application.metering import Reservation
from application.ports.chat_model import Usage
from application.ports.chat_streams import ChatStreamWriter
from domain import chat_stream
from domain.chunks import SearchResult


@dataclass(slots=True)
class Progress:
    """What an answer has produced so far: every chunk goes to live readers at once and waits
    in `pending` until stored; `parts` is the message as stored; `calls` holds each model
    call's reservation, prompt, answer and usage, settled once the answer ends."""

    writer: ChatStreamWriter
    pending: list[chat_stream.Chunk] = field(default_factory=list)
    parts: list[dict[str, Any]] = field(default_factory=list)
    next_seq: int = 0
    open_text: str | None = None
    calls: list[tuple[Reservation, list[str], str, Usage | None]] = field(default_factory=list)
    cited: set[str] = field(default_factory=set)
    last_flush: float = field(default_factory=time.monotonic)
    flushing: asyncio.Lock = field(default_factory=asyncio.Lock)

    def emit(self, chunk: chat_stream.Chunk) -> None:
        self.writer.emit(chunk)
        self.pending.append(chunk)

    def emit_all(self, chunks: list[chat_stream.Chunk]) -> None:
        for chunk in chunks:
            self.emit(chunk)

    def fail(self, error: str) -> None:
        """End the answer failed: the stream's `error` and `finish`, and the same words kept in
        the message as a `data-error` part (a UI message's part for app data), so that a reader
        of the conversation sees why it ended."""
        self.emit_all(chat_stream.failure(error))
        self.parts.append({"type": "data-error", "data": {"errorText": error}})

    def text(self, delta: str) -> None:
        if self.open_text is None:
            self.open_text = f"text-{uuid.uuid4().hex[:12]}"
            self.emit(chat_stream.text_start(self.open_text))
            self.parts.append({"type": "text", "text": ""})
        self.parts[-1]["text"] += delta
        self.emit(chat_stream.text_delta(self.open_text, delta))

    def end_text(self) -> None:
        if self.open_text is not None:
            self.emit(chat_stream.text_end(self.open_text))
            self.open_text = None

    def cite(self, passages: Sequence[SearchResult]) -> None:
        """A source (chunk and part) per passage not cited yet in this answer."""
        for passage in passages:
            source_id = f"chunk-{passage.chunk_id}"
            if source_id in self.cited:
                continue
            self.cited.add(source_id)
            title = passage.file_name
            if passage.page_number is not None:
                title = f"{passage.file_name}, page {passage.page_number}"
            location = {
                "kbId": passage.knowledge_base_id,
                "fileId": passage.file_id,
                "pageNumber": passage.page_number,
            }
            chunk = chat_stream.source_document(
                source_id, title=title, filename=passage.file_name, location=location
            )
            self.emit(chunk)
            self.parts.append({k: v for k, v in chunk.items()})
