"""MCP servers over Streamable HTTP, through the MCP SDK's client on the guarded HTTP client.

Each discovery or call is its own session (`initialize`, then `tools/list` pages or one
`tools/call`): a stateless connector, at the cost of one more round trip per call (and, for a
server that keeps sessions, its closing DELETE); the connections themselves are pooled.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from application.ports.tool_connector import ToolOutput
from domain.tool_servers import MAX_TOOLS_PER_SERVER, ToolDefinition

MAX_PAGES = 100
"""tools/list pages read at most: a server whose cursors never end cannot hold a discovery."""


@asynccontextmanager
async def _session(
    client: httpx2.AsyncClient, url: str, max_bytes: int
) -> AsyncIterator[ClientSession]:
    """An initialized MCP session with the server at `url`, closed when the block ends."""
    async with (
        streamable_http_client(url, http_client=client, max_sse_event_size=max_bytes) as (
            read,
            write,
        ),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def discover_tools(
    client: httpx2.AsyncClient, url: str, *, max_bytes: int
) -> list[ToolDefinition]:
    """`initialize`, then every page of `tools/list` (at most `MAX_TOOLS_PER_SERVER` tools)."""
    async with _session(client, url, max_bytes) as session:
        tools: list[ToolDefinition] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(
                ToolDefinition(
                    name=tool.name,
                    description=tool.description or "",
                    input_schema=dict(tool.input_schema),
                )
                for tool in page.tools
            )
            cursor = page.next_cursor
            if not cursor or len(tools) >= MAX_TOOLS_PER_SERVER:
                break
        return tools[:MAX_TOOLS_PER_SERVER]


async def call_tool(
    client: httpx2.AsyncClient, url: str, name: str, arguments: dict[str, Any], *, max_bytes: int
) -> ToolOutput:
    """`initialize`, then `tools/call`; the result as UI-message parts."""
    async with _session(client, url, max_bytes) as session:
        # Sent as a plain request: `ClientSession.call_tool` lists the server's tools again to
        # check the result against an output schema, one more round trip the model gains
        # nothing from.
        result = await session.send_request(
            types.CallToolRequest(
                params=types.CallToolRequestParams(name=name, arguments=arguments)
            ),
            types.CallToolResult,
        )
    return ToolOutput(
        content=[part for item in result.content if (part := content_part(item)) is not None],
        is_error=bool(result.is_error),
        structured=result.structured_content,
    )


def content_part(item: types.ContentBlock) -> dict[str, Any] | None:
    """One content block of a tool result as a UI-message part (images as data URLs)."""
    if isinstance(item, types.TextContent):
        return {"type": "text", "text": item.text}
    if isinstance(item, types.ImageContent):
        return {
            "type": "image",
            "mediaType": item.mime_type,
            "url": f"data:{item.mime_type};base64,{item.data}",
        }
    if isinstance(item, types.AudioContent):
        return {"type": "text", "text": f"[audio {item.mime_type}, {_size(item.data)} bytes]"}
    if isinstance(item, types.EmbeddedResource):
        resource = item.resource
        if isinstance(resource, types.TextResourceContents):
            return {"type": "text", "text": resource.text}
        mime = resource.mime_type or "application/octet-stream"
        return {
            "type": "text",
            "text": f"[resource {resource.uri}: {mime}, {_size(resource.blob)} bytes]",
        }
    if isinstance(item, types.ResourceLink):
        described = f" ({item.description})" if item.description else ""
        return {"type": "text", "text": f"[resource link {item.name}: {item.uri}]{described}"}
    dumped = item.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {"type": "text", "text": json.dumps(dumped, ensure_ascii=False)}


def _size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4
