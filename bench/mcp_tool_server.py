"""An MCP server for `tools.py`: the SDK's low-level server, stateless Streamable HTTP with JSON
bodies (as `tests/integration/tool_servers_support.py` serves it), on 127.0.0.1 only.

    .venv/bin/python bench/mcp_tool_server.py --port 8200 --name crm [--tools 20] [--token T]

It offers `--tools` generated tools (names, descriptions and input schemas of the size real
servers have), all listed in one `tools/list` page; every `tools/call` answers at once with one
text block of about 200 bytes (the arguments echoed in a JSON record). With `--token T` every
request to `/mcp` must carry `Authorization: Bearer T` (else 401), so that the platform's sealed
header values are exercised. `GET /health` answers 200, `GET /stats` the requests to `/mcp`
so far (`{"mcp_requests": N}`). uvicorn picks uvloop and httptools when
installed; no access log.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

VERBS = ["get", "list", "search", "create", "update", "archive", "export", "count", "assign",
         "close"]  # fmt: skip
NOUNS = {
    "crm": ["customer", "contact", "deal", "account", "lead"],
    "billing": ["invoice", "payment", "refund", "subscription", "credit_note"],
    "tickets": ["ticket", "comment", "incident", "sla_policy", "queue"],
}
DEFAULT_NOUNS = ["record", "item", "entry", "note", "task"]


def tool_definitions(server: str, count: int) -> list[types.Tool]:
    """`count` tools of `server`: `<verb>_<noun>`, a description of 150-250 characters and an
    object schema of 3-5 typed, described properties (an id, a query, a limit, ...)."""
    nouns = NOUNS.get(server, DEFAULT_NOUNS)
    pairs = [(verb, noun) for noun in nouns for verb in VERBS]
    tools = []
    for index in range(count):
        verb, noun = pairs[index % len(pairs)]
        name = f"{verb}_{noun}" if index < len(pairs) else f"{verb}_{noun}_{index}"
        label = noun.replace("_", " ")
        description = (
            f"{verb.capitalize()} {label} records in the {server} system. Returns the matching "
            f"{label} fields (id, status, owner, timestamps) as JSON. Use it when the member asks "
            f"to {verb} a {label}; ids look like {noun[:3].upper()}-12345."
        )
        properties: dict[str, Any] = {
            f"{noun}_id": {"type": "string", "description": f"The {label}'s id"},
            "query": {"type": "string", "description": "Free-text filter, optional"},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 100,
                "description": "At most this many results",
            },
        }
        if index % 2:
            properties["status"] = {
                "type": "string",
                "enum": ["open", "pending", "closed"],
                "description": "Only records in this status",
            }
        if index % 3 == 0:
            properties["fields"] = {
                "type": "array",
                "items": {"type": "string"},
                "description": "The fields to return (all when absent)",
            }
        tools.append(
            types.Tool(
                name=name,
                description=description,
                input_schema={
                    "type": "object",
                    "properties": properties,
                    "required": [f"{noun}_id"] if verb in ("get", "update", "close") else [],
                },
            )
        )
    return tools


def make_app(name: str, count: int, token: str | None) -> Any:
    tools = tool_definitions(name, count)
    known = {tool.name for tool in tools}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in known:
            raise ValueError(f"unknown tool {params.name}")
        record = {
            "server": name,
            "tool": params.name,
            "arguments": params.arguments or {},
            "status": "open",
            "owner": "ops-team",
            "updated": "2026-11-02T09:15:00Z",
        }
        text = json.dumps(record, separators=(",", ":"))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    seen = {"mcp_requests": 0}

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "tools": len(tools)})

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse(seen)

    server: Server[Any] = Server(f"bench-{name}", on_list_tools=list_tools, on_call_tool=call_tool)
    app = server.streamable_http_app(
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        custom_starlette_routes=[
            Route("/health", health, methods=["GET"]),
            Route("/stats", stats, methods=["GET"]),
        ],
    )
    expected = None if token is None else f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/mcp"):
            seen["mcp_requests"] += 1
            given = dict(scope["headers"]).get(b"authorization")
            if expected is not None and given != expected:
                body = b'{"error":"unauthorized"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", default="crm", help="the server's name (crm, billing, tickets)")
    parser.add_argument("--tools", type=int, default=20)
    parser.add_argument("--token", default=None, help="the bearer token required")
    args = parser.parse_args()
    app = make_app(args.name, args.tools, args.token)
    print(f"ready {args.port}", flush=True)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=1,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
