"""The chunks of an assistant response as it streams: the AI SDK UI message stream protocol v1
vocabulary, which is also how a response's progress is stored so that a client can resume it.

Only the fields the protocol documents appear: a stock `useChat` client of AI SDK 5 validates
every chunk against a strict schema (version 7, which the tests and the console pin, reads them
loosely but still refuses an unknown type).
"""

from __future__ import annotations

from typing import Any

Chunk = dict[str, Any]

START = "start"
FINISH = "finish"
ERROR = "error"
ABORT = "abort"
# A failure is an `error` then `finish`: the error alone does not end the stream.
ENDINGS = frozenset({FINISH, ABORT})


def start(message_id: str) -> Chunk:
    return {"type": "start", "messageId": message_id}


def start_step() -> Chunk:
    return {"type": "start-step"}


def text_start(part_id: str) -> Chunk:
    return {"type": "text-start", "id": part_id}


def text_delta(part_id: str, delta: str) -> Chunk:
    return {"type": "text-delta", "id": part_id, "delta": delta}


def text_end(part_id: str) -> Chunk:
    return {"type": "text-end", "id": part_id}


# The key of the platform's own entry in a chunk's `providerMetadata` (the AI SDK's field for
# what a provider adds to a source): where a cited passage lives, for a client to open it.
PROVIDER_METADATA_KEY = "agentPlatform"


def source_document(
    source_id: str,
    *,
    title: str,
    filename: str | None,
    location: dict[str, Any] | None = None,
) -> Chunk:
    """A `source-document` chunk; `location` (the knowledge base, file and page of a cited
    passage) goes in `providerMetadata`, so a client can open the page or the file's text."""
    chunk: Chunk = {
        "type": "source-document",
        "sourceId": source_id,
        "mediaType": "text/plain",
        "title": title,
    }
    if filename:
        chunk["filename"] = filename
    if location is not None:
        chunk["providerMetadata"] = {PROVIDER_METADATA_KEY: location}
    return chunk


def tool_input_start(call_id: str, tool_name: str) -> Chunk:
    return {"type": "tool-input-start", "toolCallId": call_id, "toolName": tool_name}


def tool_input_available(call_id: str, tool_name: str, tool_input: Any) -> Chunk:
    return {
        "type": "tool-input-available",
        "toolCallId": call_id,
        "toolName": tool_name,
        "input": tool_input,
    }


def tool_output_available(call_id: str, output: Any) -> Chunk:
    return {"type": "tool-output-available", "toolCallId": call_id, "output": output}


def tool_output_error(call_id: str, error_text: str) -> Chunk:
    return {"type": "tool-output-error", "toolCallId": call_id, "errorText": error_text}


def tool_output_denied(call_id: str) -> Chunk:
    return {"type": "tool-output-denied", "toolCallId": call_id}


def tool_approval_request(approval_id: str, call_id: str) -> Chunk:
    return {"type": "tool-approval-request", "approvalId": approval_id, "toolCallId": call_id}


def tool_approval_response(approval_id: str, approved: bool, reason: str | None) -> Chunk:
    chunk: Chunk = {
        "type": "tool-approval-response",
        "approvalId": approval_id,
        "approved": approved,
    }
    if reason:
        chunk["reason"] = reason
    return chunk


def finish_step() -> Chunk:
    return {"type": "finish-step"}


def finish() -> Chunk:
    return {"type": "finish"}


def error(error_text: str) -> Chunk:
    return {"type": "error", "errorText": error_text}


def failure(error_text: str) -> list[Chunk]:
    """How a response that failed ends: the error, then `finish`."""
    return [error(error_text), finish()]


def abort() -> Chunk:
    return {"type": "abort"}


def is_ending(chunk: Chunk) -> bool:
    """Whether `chunk` is the last one of a response."""
    return chunk.get("type") in ENDINGS


def compact(chunks: list[Chunk]) -> list[Chunk]:
    """The same stream in fewer chunks: consecutive `text-delta`s of one text part become one.
    A reader assembles exactly the same message from either; stored runs keep the short form."""
    merged: list[Chunk] = []
    for chunk in chunks:
        last = merged[-1] if merged else None
        if (
            last is not None
            and chunk.get("type") == "text-delta"
            and last.get("type") == "text-delta"
            and last.get("id") == chunk.get("id")
        ):
            merged[-1] = {**last, "delta": last["delta"] + chunk["delta"]}
        else:
            merged.append(chunk)
    return merged
