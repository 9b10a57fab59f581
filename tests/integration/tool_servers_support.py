"""Real tool servers for the connector's tests, served by uvicorn on 127.0.0.1: an MCP server
(the SDK's low-level server, stateless Streamable HTTP, tools/list in pages of `PAGE_SIZE`) and
a Litestar API serving its own OpenAPI document, plus a few raw routes (redirects, a body
beyond any cap)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import threading
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import uvicorn
from litestar import Litestar, get, post
from litestar.openapi import OpenAPIConfig
from litestar.params import FromPath, FromQuery, JSONBody
from litestar.response import Redirect
from mcp.server import Server, ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings
from msgspec import Struct
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from tests.conftest import free_port

PAGE_SIZE = 5
EXTRA_TOOLS = 9
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 64).decode()
SLOW_SECONDS = 5.0
BIG_BYTES = 300_000


def _tool(name: str, description: str, properties: dict[str, Any] | None = None) -> types.Tool:
    return types.Tool(
        name=name,
        description=description,
        input_schema={"type": "object", "properties": properties or {}},
    )


TOOLS = [
    _tool("echo", "Echoes its text", {"text": {"type": "string"}}),
    _tool("slow", "Answers after a while"),
    _tool("fail", "Raises"),
    _tool("refuse", "Answers with an error result"),
    _tool("image", "A tiny PNG"),
    _tool("resources", "Embedded resources and a link"),
    _tool("weather", "Structured content", {"city": {"type": "string"}}),
    _tool("big", "A result over the connector's cap in the tests"),
    *(_tool(f"extra-{index}", f"Extra tool {index}") for index in range(EXTRA_TOOLS)),
]


async def _list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    start = int(params.cursor) if params is not None and params.cursor else 0
    end = start + PAGE_SIZE
    return types.ListToolsResult(
        tools=TOOLS[start:end], next_cursor=str(end) if end < len(TOOLS) else None
    )


async def _call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    arguments = params.arguments or {}
    match params.name:
        case "echo":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=str(arguments.get("text")))]
            )
        case "slow":
            await asyncio.sleep(SLOW_SECONDS)
            return types.CallToolResult(content=[types.TextContent(type="text", text="late")])
        case "fail":
            raise RuntimeError("the tool broke (internal detail)")
        case "refuse":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text="no such city")], is_error=True
            )
        case "image":
            return types.CallToolResult(
                content=[types.ImageContent(type="image", data=PNG, mime_type="image/png")]
            )
        case "resources":
            return types.CallToolResult(
                content=[
                    types.EmbeddedResource(
                        type="resource",
                        resource=types.TextResourceContents(uri="memo://1", text="memo text"),
                    ),
                    types.EmbeddedResource(
                        type="resource",
                        resource=types.BlobResourceContents(
                            uri="memo://2", blob=PNG, mime_type="image/png"
                        ),
                    ),
                    types.ResourceLink(type="resource_link", name="report", uri="memo://3"),
                ]
            )
        case "weather":
            city = str(arguments.get("city"))
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"{city}: 21 C")],
                structured_content={"city": city, "celsius": 21},
            )
        case "big":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text="x" * BIG_BYTES)]
            )
    raise ValueError(f"unknown tool {params.name}")


def mcp_app(*, json_response: bool = True) -> Starlette:
    """The MCP server at /mcp, answering with JSON bodies or (`json_response=False`) SSE."""
    server: Server[Any] = Server("test-tools", on_list_tools=_list_tools, on_call_tool=_call_tool)
    return server.streamable_http_app(
        stateless_http=True,
        json_response=json_response,
        # Tests reach it by names resolved (by a test resolver) to 127.0.0.1, too.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )


class Pet(Struct):
    name: str
    tags: list[str] = []


@get("/pets/{pet_id:int}", operation_id="getPet", summary="One pet", sync_to_thread=False)
def get_pet(pet_id: FromPath[int], verbose: FromQuery[bool] = False) -> dict[str, Any]:
    if pet_id == 404:
        from litestar.exceptions import NotFoundException

        raise NotFoundException("no pet 404")
    return {"id": pet_id, "name": f"pet-{pet_id}", "verbose": verbose}


@get("/search", operation_id="searchPets", summary="Search pets", sync_to_thread=False)
def search(q: FromQuery[str], limit: FromQuery[int] = 10) -> list[dict[str, Any]]:
    return [{"name": f"{q}-{index}"} for index in range(min(limit, 3))]


@post("/pets", operation_id="createPet", summary="Add a pet", sync_to_thread=False)
def create_pet(data: JSONBody[Pet]) -> dict[str, Any]:
    return {"created": data.name, "tags": data.tags}


@get("/text", operation_id="plainText", media_type="text/plain", sync_to_thread=False)
def text() -> str:
    return "just text"


@get("/moved", operation_id="moved", sync_to_thread=False)
def moved() -> Redirect:
    return Redirect(path="/text")


def openapi_app() -> Litestar:
    return Litestar(
        [get_pet, search, create_pet, text, moved],
        openapi_config=OpenAPIConfig(title="Pets", version="1.0.0", path="/schema"),
    )


def raw_app(redirect_to: str) -> Starlette:
    """Routes no framework would serve: a redirect to `redirect_to`, a huge body, nonsense."""

    async def away(request: Any) -> RedirectResponse:
        return RedirectResponse(redirect_to, status_code=307)

    async def huge(request: Any) -> PlainTextResponse:
        return PlainTextResponse("y" * BIG_BYTES)

    async def nonsense(request: Any) -> PlainTextResponse:
        return PlainTextResponse("this is not JSON-RPC", media_type="application/json")

    async def broken(request: Any) -> JSONResponse:
        return JSONResponse({"error": "down"}, status_code=503)

    async def elsewhere(request: Any) -> JSONResponse:
        # A document whose calls go to another host than its own.
        return JSONResponse(
            {
                "openapi": "3.1.0",
                "info": {"title": "Elsewhere", "version": "1"},
                "servers": [{"url": "http://127.0.0.1:9/api"}],
                "paths": {
                    "/ping": {
                        "get": {
                            "operationId": "ping",
                            "responses": {"200": {"description": "pong"}},
                        }
                    }
                },
            }
        )

    async def bomb(request: Any) -> Response:
        # 50 MB of zeros in about 50 kB, sent compressed whatever the client accepts.
        body = gzip.compress(b"0" * 50_000_000, compresslevel=9)
        headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
        return Response(body, headers=headers)

    return Starlette(
        routes=[
            Route("/away", away, methods=["GET", "POST"]),
            Route("/huge", huge, methods=["GET", "POST"]),
            Route("/nonsense", nonsense, methods=["POST"]),
            Route("/broken", broken, methods=["GET", "POST"]),
            Route("/bomb", bomb, methods=["GET", "POST"]),
            Route("/elsewhere.json", elsewhere),
        ]
    )


@contextlib.asynccontextmanager
async def serving(app: Any, port: int | None = None) -> AsyncIterator[str]:
    """uvicorn serving `app` on 127.0.0.1 until the block ends; its base URL."""
    port = port or free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        lifespan="on",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        assert not task.done(), "the test server did not start"
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


class Served:
    """An ASGI app served by uvicorn on 127.0.0.1 (`serving`) from a thread and a loop of its
    own, until `stop`: for tests whose client runs in another loop (the test client's, a
    CLI's, a browser's)."""

    def __init__(self, app: Any) -> None:
        self._stop = threading.Event()
        ready = threading.Event()
        urls: list[str] = []

        async def serve() -> None:
            async with serving(app) as url:
                urls.append(url)
                ready.set()
                await asyncio.to_thread(self._stop.wait)

        self._thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
        self._thread.start()
        assert ready.wait(30), "the test server did not start"
        self.url = urls[0]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
