"""A `ChatRequest` in the form of OpenAI's `POST /chat/completions` body.

What a server may refuse is chosen by the caller, which learns it from the refusals: whether to
send `stream_options`, which field carries the output limit (`max_tokens`, or
`max_completion_tokens` for OpenAI's newer models) and how to ask for JSON matching a schema
(`json_schema` as OpenAI and vLLM take it, or `json_object` with a `schema` as
llama-cpp-python takes it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from application.ports.chat_model import ChatRequest, ChatTurn, ToolSpec

SchemaFormat = Literal["json_schema", "json_object"]
SCHEMA_NAME = "response"


def payload(
    request: ChatRequest,
    model: str,
    *,
    limit_field: str,
    stream_options: bool,
    schema_format: SchemaFormat,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": request.model or model,
        "messages": [message(turn) for turn in request.turns],
        "stream": True,
    }
    if request.max_output_tokens is not None:
        body[limit_field] = request.max_output_tokens
    if stream_options:
        body["stream_options"] = {"include_usage": True}
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.tools:
        body["tools"] = [tool(spec) for spec in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = tool_choice(request.tool_choice)
    if request.response_schema is not None:
        body["response_format"] = response_format(request.response_schema, schema_format)
    return body


def message(turn: ChatTurn) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": turn.role, "content": turn.content}
    if turn.role == "assistant" and turn.tool_calls:
        entry["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in turn.tool_calls
        ]
    if turn.role == "tool":
        entry["tool_call_id"] = turn.tool_call_id or ""
    return entry


def tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


def tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def response_format(schema: Mapping[str, Any], schema_format: SchemaFormat) -> dict[str, Any]:
    if schema_format == "json_object":
        return {"type": "json_object", "schema": dict(schema)}
    return {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "schema": dict(schema)}}
