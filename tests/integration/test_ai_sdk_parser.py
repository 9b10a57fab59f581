"""Our UI message stream, read by the `ai` npm package's own client pipeline under Node.

The pinned `ai` release validates every chunk against strict schemas (an undocumented field is
rejected, as in every `useChat` client up to ai 5.0.216), so what passes here passes there.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from domain import chat_stream
from domain.chat_stream import Chunk
from entrypoints.http.sse import DONE, KEEP_ALIVE, STREAM_FAILED, encode_chunk, sse_body
from tests.ai_sdk import assert_accepted, run_ai_sdk_parser


def body(*chunks: Chunk) -> bytes:
    return b"".join(encode_chunk(chunk) for chunk in chunks) + DONE


def text(part_id: str, *deltas: str) -> list[Chunk]:
    return [
        chat_stream.text_start(part_id),
        *(chat_stream.text_delta(part_id, delta) for delta in deltas),
        chat_stream.text_end(part_id),
    ]


def types(chunks: list[Chunk]) -> list[str]:
    return [chunk["type"] for chunk in chunks]


def parts_of(result: dict[str, Any], part_type: str) -> list[dict[str, Any]]:
    return [part for part in result["message"]["parts"] if part["type"] == part_type]


def test_a_text_answer_is_assembled_into_one_text_part() -> None:
    chunks = [
        chat_stream.start("msg_1"),
        chat_stream.start_step(),
        *text("txt_1", "Hello", ", ", "wörld ✓", "\nsecond line"),
        chat_stream.finish_step(),
        chat_stream.finish(),
    ]

    result = run_ai_sdk_parser(body(*chunks))

    assert_accepted(result)
    assert result["chunks"] == types(chunks)
    assert result["streamErrors"] == []
    assert result["message"] == {
        "id": "msg_1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "Hello, wörld ✓\nsecond line", "state": "done"},
        ],
    }


def test_knowledge_base_sources_become_source_document_parts() -> None:
    chunks = [
        chat_stream.start("msg_2"),
        chat_stream.start_step(),
        *text("txt_1", "Everyone gets 30 days."),
        chat_stream.source_document("kb1:file7:3", title="Holidays", filename="holidays.md"),
        chat_stream.source_document(
            "kb1:file9:0",
            title="Untitled notes",
            filename=None,
            location={"kbId": 1, "fileId": "file9", "pageNumber": 2},
        ),
        chat_stream.finish_step(),
        chat_stream.finish(),
    ]

    result = run_ai_sdk_parser(body(*chunks))

    assert_accepted(result)
    assert parts_of(result, "text") == [
        {"type": "text", "text": "Everyone gets 30 days.", "state": "done"}
    ]
    assert parts_of(result, "source-document") == [
        {
            "type": "source-document",
            "sourceId": "kb1:file7:3",
            "mediaType": "text/plain",
            "title": "Holidays",
            "filename": "holidays.md",
        },
        {
            "type": "source-document",
            "sourceId": "kb1:file9:0",
            "mediaType": "text/plain",
            "title": "Untitled notes",
            "providerMetadata": {"agentPlatform": {"kbId": 1, "fileId": "file9", "pageNumber": 2}},
        },
    ]


def test_a_tool_call_between_steps_becomes_a_tool_part_with_its_output() -> None:
    tool_input = {"query": "holiday policy", "limit": 3}
    tool_output = {"results": [{"text": "Everyone gets 30 days.", "score": 0.91}]}
    chunks = [
        chat_stream.start("msg_3"),
        chat_stream.start_step(),
        chat_stream.tool_input_start("call_1", "search_knowledge_base"),
        chat_stream.tool_input_available("call_1", "search_knowledge_base", tool_input),
        chat_stream.tool_output_available("call_1", tool_output),
        chat_stream.finish_step(),
        chat_stream.start_step(),
        *text("txt_2", "You get 30 days."),
        chat_stream.finish_step(),
        chat_stream.finish(),
    ]

    result = run_ai_sdk_parser(body(*chunks))

    assert_accepted(result)
    assert result["chunks"] == types(chunks)
    parts = result["message"]["parts"]
    assert [part["type"] for part in parts] == [
        "step-start",
        "tool-search_knowledge_base",
        "step-start",
        "text",
    ]
    tool = parts[1]
    assert tool["toolCallId"] == "call_1"
    assert tool["state"] == "output-available"
    assert tool["input"] == tool_input
    assert tool["output"] == tool_output
    assert parts[3]["text"] == "You get 30 days."


def test_a_failed_tool_call_becomes_a_tool_part_in_error() -> None:
    chunks = [
        chat_stream.start("msg_4"),
        chat_stream.start_step(),
        chat_stream.tool_input_start("call_9", "load_skill"),
        chat_stream.tool_input_available("call_9", "load_skill", {"skillId": "s1"}),
        chat_stream.tool_output_error("call_9", "Skill not found"),
        chat_stream.finish_step(),
        chat_stream.finish(),
    ]

    result = run_ai_sdk_parser(body(*chunks))

    assert_accepted(result)
    (tool,) = parts_of(result, "tool-load_skill")
    assert tool["state"] == "output-error"
    assert tool["errorText"] == "Skill not found"
    assert tool["input"] == {"skillId": "s1"}


def test_an_error_chunk_is_reported_and_keeps_what_was_produced() -> None:
    chunks = [
        chat_stream.start("msg_5"),
        chat_stream.start_step(),
        chat_stream.text_start("txt_1"),
        chat_stream.text_delta("txt_1", "Partial answ"),
        chat_stream.error("The model did not answer in time."),
    ]

    result = run_ai_sdk_parser(body(*chunks))

    assert_accepted(result)
    assert result["chunks"][-1] == "error"
    assert result["streamErrors"] == ["The model did not answer in time."]
    assert parts_of(result, "text") == [
        {"type": "text", "text": "Partial answ", "state": "streaming"}
    ]


def test_an_abort_ends_the_stream_with_the_partial_message() -> None:
    chunks = [
        chat_stream.start("msg_6"),
        chat_stream.start_step(),
        chat_stream.text_start("txt_1"),
        chat_stream.text_delta("txt_1", "I was about to"),
        chat_stream.abort(),
    ]

    result = run_ai_sdk_parser(body(*chunks))

    assert_accepted(result)
    assert result["chunks"] == types(chunks)
    assert result["streamErrors"] == []
    assert result["message"]["id"] == "msg_6"
    assert parts_of(result, "text") == [
        {"type": "text", "text": "I was about to", "state": "streaming"}
    ]


async def test_the_framed_body_with_keep_alives_and_a_failing_source_is_accepted() -> None:
    async def source() -> AsyncIterator[list[Chunk]]:
        yield [chat_stream.start("msg_7"), chat_stream.start_step()]
        yield [chat_stream.text_start("txt_1")]
        yield []
        yield [chat_stream.text_delta("txt_1", "Half")]
        raise RuntimeError("provider connection reset")

    frames = [frame async for frame in sse_body(source())]
    assert KEEP_ALIVE in frames
    assert frames[-1] == DONE

    result = await asyncio.to_thread(run_ai_sdk_parser, b"".join(frames))

    assert_accepted(result)
    assert result["chunks"] == ["start", "start-step", "text-start", "text-delta", "error"]
    assert result["streamErrors"] == [STREAM_FAILED]
    assert parts_of(result, "text") == [{"type": "text", "text": "Half", "state": "streaming"}]


def test_every_chunk_builder_passes_the_strict_schema() -> None:
    every_builder = [
        chat_stream.start("msg_8"),
        chat_stream.start_step(),
        chat_stream.text_start("t"),
        chat_stream.text_delta("t", "x"),
        chat_stream.text_end("t"),
        chat_stream.source_document("s1", title="T", filename="f.txt"),
        chat_stream.source_document("s2", title="T", filename=None),
        chat_stream.tool_input_start("c1", "tool"),
        chat_stream.tool_input_available("c1", "tool", None),
        chat_stream.tool_output_available("c1", [1, "two", None]),
        chat_stream.tool_input_start("c2", "tool"),
        chat_stream.tool_input_available("c2", "tool", {}),
        chat_stream.tool_output_error("c2", "failed"),
        chat_stream.finish_step(),
        chat_stream.finish(),
        chat_stream.error("after the end"),
        chat_stream.abort(),
    ]

    result = run_ai_sdk_parser(body(*every_builder))

    assert_accepted(result)
    assert result["chunks"] == types(every_builder)


def test_an_unknown_chunk_type_is_rejected_by_the_parser() -> None:
    # `ai` 7 reads chunks as loose objects: an undocumented field passes, an unknown type not.
    extra = {**chat_stream.text_delta("txt_1", "sneaky"), "tokenCount": 1}
    unknown = {"type": "text-chunk", "id": "txt_1", "delta": "?"}

    result = run_ai_sdk_parser(
        body(
            chat_stream.start("msg_9"),
            chat_stream.start_step(),
            chat_stream.text_start("txt_1"),
            chat_stream.text_delta("txt_1", "fine"),
            extra,
            unknown,
            chat_stream.text_end("txt_1"),
            chat_stream.finish_step(),
            chat_stream.finish(),
        )
    )

    assert result["exitCode"] != 0
    assert [error["chunk"] for error in result["errors"]] == [unknown]
    assert result["errors"][0]["kind"] == "invalid-chunk"
    assert result["errors"][0]["message"] == "type: not a chunk type of the protocol"
    assert "text-delta" in result["chunks"]
    assert parts_of(result, "text") == [{"type": "text", "text": "finesneaky", "state": "done"}]
