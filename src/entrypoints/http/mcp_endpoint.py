"""`POST /mcp`: the platform as a Model Context Protocol server (Streamable HTTP, stateless;
`CONTRACT.md`, "Tools").

An MCP client (an IDE, a desktop assistant, another agent) sends the same bearer token as any
client; the bearer middleware checks it and opens the request's dependency scope before the
MCP SDK sees the request, so each tool runs the same use case as its HTTP endpoint, with the
caller's rights: `search_knowledge_base`, `list_agents` and `ask_agent` (which answers once the
run ends). A refusal (a member without rights, an unknown id, bad arguments) is the tool's
error result with the message the HTTP endpoint gives, never a protocol error.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from dishka import AsyncContainer
from litestar.handlers import asgi
from litestar.types import Receive, Scope, Send
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from application.ports.chat_streams import ChatStreams
from application.use_cases.list_agents import ListAgents, ListAgentsQuery
from application.use_cases.list_knowledge_bases import (
    ListKnowledgeBases,
    ListKnowledgeBasesQuery,
)
from application.use_cases.search_knowledge_base import (
    SearchKnowledgeBase,
    SearchKnowledgeBaseQuery,
)
from application.use_cases.send_chat_message import SendChatMessage, SendChatMessageCommand
from domain.chunks import MAX_SEARCHED
from domain.errors import DomainError
from domain.identity import Caller, Identity
from entrypoints.http.injection import CONTAINER_KEY
from entrypoints.http.knowledge_base_schemas import SearchResultOut
from entrypoints.wiring import OrgScopes

MCP_PATH = "/mcp"
MAX_BODY_BYTES = 1_000_000

TOOLS = [
    types.Tool(
        name="search_knowledge_base",
        description="Search the organization's knowledge bases (hybrid vector and full-text "
        "search) and return the best passages with their file names and scores. Without "
        "kbIds, searches the organization's most recent knowledge bases (up to 20).",
        input_schema={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for"},
                "kbIds": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 1},
                    "maxItems": MAX_SEARCHED,
                    "description": "The knowledge bases to search (default: the latest 20)",
                },
                "topK": {"type": "integer", "minimum": 1, "maximum": 50},
            },
            "required": ["query"],
        },
    ),
    types.Tool(
        name="list_agents",
        description="The organization's agents: id, name, description and model.",
        input_schema={"type": "object", "properties": {}},
    ),
    types.Tool(
        name="ask_agent",
        description="Send a message to one of the organization's agents and return its "
        "answer once it is complete, with the conversation's threadId (pass it back to "
        "continue the same conversation).",
        input_schema={
            "type": "object",
            "properties": {
                "agentId": {"type": "integer", "minimum": 1},
                "message": {"type": "string", "minLength": 1},
                "threadId": {"type": "string", "description": "A conversation to continue"},
            },
            "required": ["agentId", "message"],
        },
    ),
]

Handler = Callable[[AsyncContainer, dict[str, Any]], Awaitable[Any]]


async def _search(container: AsyncContainer, arguments: dict[str, Any]) -> Any:
    caller = await container.get(Caller)
    kb_ids = arguments.get("kbIds")
    skip_missing = kb_ids is None
    if kb_ids is None:
        listed = await (await container.get(ListKnowledgeBases)).execute(
            ListKnowledgeBasesQuery(caller=caller)
        )
        kb_ids = [kb.id for kb in listed][:MAX_SEARCHED]
        if not kb_ids:
            return {"results": []}
    answer = await (await container.get(SearchKnowledgeBase)).execute(
        SearchKnowledgeBaseQuery.parse(
            caller=caller,
            kb_ids=kb_ids,
            query=arguments.get("query"),
            top_k=arguments.get("topK"),
            skip_missing=skip_missing,
        )
    )
    # The results as `POST /kb/search` answers them.
    return {"results": msgspec.to_builtins(SearchResultOut.from_entities(answer.results))}


async def _list_agents(container: AsyncContainer, arguments: dict[str, Any]) -> Any:
    caller = await container.get(Caller)
    agents = await (await container.get(ListAgents)).execute(ListAgentsQuery.parse(caller=caller))
    return {
        "agents": [
            {"id": a.id, "name": a.name, "description": a.description, "model": a.model}
            for a in agents
        ]
    }


async def _ask_agent(container: AsyncContainer, arguments: dict[str, Any]) -> Any:
    identity = await container.get(Identity)
    scopes = await container.get(OrgScopes)
    streams = await container.get(ChatStreams)
    message = arguments.get("message")
    async with scopes.acting_as(identity) as scope:
        caller = await scope.get(Caller)
        started = await (await scope.get(SendChatMessage)).execute(
            SendChatMessageCommand.parse(
                caller=caller,
                agent_id=arguments.get("agentId"),
                messages=[{"role": "user", "parts": [{"type": "text", "text": message}]}],
                thread_id=arguments.get("threadId"),
            )
        )
    text: list[str] = []
    error: str | None = None
    approvals: list[dict[str, Any]] = []
    async for chunks in streams.follow(caller.org_id, started.run_id):
        for chunk in chunks:
            if chunk.get("type") == "text-delta":
                text.append(str(chunk.get("delta", "")))
            elif chunk.get("type") == "error":
                error = str(chunk.get("errorText", "The answer failed."))
            elif chunk.get("type") == "tool-approval-request":
                approvals.append({k: chunk[k] for k in ("approvalId", "toolCallId")})
    if error is not None:
        raise _AnswerFailed(error, started.thread_id)
    answer: dict[str, Any] = {"threadId": started.thread_id, "answer": "".join(text)}
    if approvals:
        # The member decides in the conversation (`POST /chat/{threadId}/approvals`).
        answer["awaitingApproval"] = approvals
    return answer


class _AnswerFailed(Exception):
    def __init__(self, message: str, thread_id: str) -> None:
        super().__init__(message)
        self.message = f"{message} (threadId {thread_id})"


HANDLERS: dict[str, Handler] = {
    "search_knowledge_base": _search,
    "list_agents": _list_agents,
    "ask_agent": _ask_agent,
}


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


async def _list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def _call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    handler = HANDLERS.get(params.name)
    if handler is None:
        return _error(f"There is no tool named {params.name!r}.")
    request = ctx.request
    container = request.scope.get("state", {}).get(CONTAINER_KEY) if request else None
    if not isinstance(container, AsyncContainer):
        return _error("The request has no authenticated scope.")
    try:
        result = await handler(container, dict(params.arguments or {}))
    except DomainError as refused:
        return _error(refused.message)
    except _AnswerFailed as failed:
        return _error(failed.message)
    text = json.dumps(result, ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=result, is_error=False
    )


class McpEndpoint:
    """The MCP server, served at `MCP_PATH` (`handler`) statelessly with JSON responses: each
    request gets a session manager of its own, run in the request's task, so that the tools'
    database work happens in the loop and the dependency scope of the request that asked."""

    def __init__(self) -> None:
        self.server: Server[Any] = Server(
            "agent-platform",
            instructions="Search this organization's knowledge and ask its agents.",
            on_list_tools=_list_tools,
            on_call_tool=_call_tool,
        )

        @asgi(MCP_PATH, is_mount=False, copy_scope=False)
        async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
            manager = StreamableHTTPSessionManager(
                self.server,
                json_response=True,
                stateless=True,
                # The bearer token, checked before the SDK sees a request, protects this
                # endpoint; the SDK's Host-header check is for unauthenticated local servers.
                security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
                max_request_body_size=MAX_BODY_BYTES,
            )
            async with manager.run():
                await manager.handle_request(scope, receive, send)  # type: ignore[arg-type]

        self.handler = mcp_endpoint
