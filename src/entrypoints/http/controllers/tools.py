"""`/tools`: the organization's tool servers (MCP servers and OpenAPI-described HTTP APIs)."""

from __future__ import annotations

from typing import Annotated

from dishka import FromDishka
from litestar import Controller, delete, get, patch, post
from litestar.params import JSONBody

from application.use_cases.create_tool_server import CreateToolServer, CreateToolServerCommand
from application.use_cases.delete_tool_server import DeleteToolServer, DeleteToolServerCommand
from application.use_cases.list_tool_servers import ListToolServers, ListToolServersQuery
from application.use_cases.refresh_tool_server import RefreshToolServer, RefreshToolServerCommand
from application.use_cases.update_tool_server import UpdateToolServer, UpdateToolServerCommand
from domain.agents import require_agent_manager
from domain.identity import Caller, Identity
from entrypoints.http.injection import inject
from entrypoints.http.openapi import body_errors, errors
from entrypoints.http.params import TOOL_SERVER_ID
from entrypoints.http.rules import access
from entrypoints.http.schemas import SuccessMessage, command
from entrypoints.http.tool_schemas import (
    CreateToolServerBody,
    RefreshToolServerBody,
    ToolServerListResponse,
    ToolServerOut,
    ToolServerResponse,
    UpdateToolServerBody,
)
from entrypoints.wiring import OrgScopes


class ToolServerController(Controller):
    path = "/tools"
    tags = ["Tools"]

    @post(
        status_code=201,
        responses=body_errors(403, 409),
        summary="Connect a tool server (MCP or OpenAPI) and discover its tools",
        description="A server that cannot be reached is still created, with `status: error` "
        "and the reason in `error`.",
        opt=access(require_agent_manager),
    )
    @inject
    async def create(
        self,
        data: JSONBody[CreateToolServerBody],
        identity: FromDishka[Identity],
        scopes: FromDishka[OrgScopes],
        use_case: FromDishka[CreateToolServer],
    ) -> ToolServerResponse:
        caller = await _caller(scopes, identity)
        server = await use_case.execute(command(CreateToolServerCommand.parse, data, caller=caller))
        return ToolServerResponse(success=True, tool_server=ToolServerOut.of(server))

    @get(
        responses=errors(400, 403, 404),
        summary="List the organization's tool servers, or get one with toolServerId",
        description="With `toolServerId` the body is `{success, toolServer}`; otherwise "
        "`{success, toolServers}`, by name.",
    )
    @inject
    async def read(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[ListToolServers],
        tool_server_id: Annotated[int | None, TOOL_SERVER_ID] = None,
    ) -> ToolServerResponse | ToolServerListResponse:
        query = ListToolServersQuery.parse(caller=caller, tool_server_id=tool_server_id)
        servers = await use_case.execute(query)
        if tool_server_id is not None:
            return ToolServerResponse(success=True, tool_server=ToolServerOut.of(servers[0]))
        return ToolServerListResponse(
            success=True, tool_servers=[ToolServerOut.of(s) for s in servers]
        )

    @patch(
        responses=body_errors(403, 404, 409),
        summary="Change a tool server",
        description="`headers`, when sent, replaces every header value; a change of `url`, "
        "`kind` or `headers` discovers the tools again.",
        opt=access(require_agent_manager),
    )
    @inject
    async def update(
        self,
        data: JSONBody[UpdateToolServerBody],
        identity: FromDishka[Identity],
        scopes: FromDishka[OrgScopes],
        use_case: FromDishka[UpdateToolServer],
    ) -> ToolServerResponse:
        caller = await _caller(scopes, identity)
        server = await use_case.execute(command(UpdateToolServerCommand.parse, data, caller=caller))
        return ToolServerResponse(success=True, tool_server=ToolServerOut.of(server))

    @delete(
        status_code=200,
        responses=errors(400, 403, 404),
        summary="Delete a tool server; agents that used it lose it",
        opt=access(require_agent_manager),
    )
    @inject
    async def remove(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[DeleteToolServer],
        tool_server_id: Annotated[int, TOOL_SERVER_ID],
    ) -> SuccessMessage:
        await use_case.execute(
            DeleteToolServerCommand.parse(caller=caller, tool_server_id=tool_server_id)
        )
        return SuccessMessage(success=True, message="Tool server deleted")

    @post(
        "/refresh",
        status_code=200,
        responses=body_errors(403, 404),
        summary="Discover a tool server's tools again",
        description="A server that cannot be reached keeps its tools and gets `status: error`.",
        opt=access(require_agent_manager),
    )
    @inject
    async def refresh(
        self,
        data: JSONBody[RefreshToolServerBody],
        identity: FromDishka[Identity],
        scopes: FromDishka[OrgScopes],
        use_case: FromDishka[RefreshToolServer],
    ) -> ToolServerResponse:
        caller = await _caller(scopes, identity)
        server = await use_case.execute(
            command(RefreshToolServerCommand.parse, data, caller=caller)
        )
        return ToolServerResponse(success=True, tool_server=ToolServerOut.of(server))


async def _caller(scopes: OrgScopes, identity: Identity) -> Caller:
    """The caller, resolved in a short scope: these routes talk to a tool server, and the
    request's own scope would hold a database connection while it answers."""
    async with scopes.acting_as(identity) as scope:
        return await scope.get(Caller)
