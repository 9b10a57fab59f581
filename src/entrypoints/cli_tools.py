"""`agent-platform tools add|list|refresh|remove`: an organization's tool servers from the
command line, through the same use cases and container as `/tools`.

`add` registers an MCP server (`--kind mcp`, the default) or an OpenAPI document (`--kind
openapi`) and asks it for its tools at once, as `POST /tools` does: a server that cannot be
reached is still added, with status `error` and the reason (exit code 0, the reason on standard
error). Header values (`--header 'Authorization: Bearer …'`, repeatable) are sealed like those
sent over HTTP and never printed. Output goes to standard output (with `--json`, the records
`GET /tools` answers); errors to standard error with exit code 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import msgspec

from application.use_cases.create_tool_server import CreateToolServer, CreateToolServerCommand
from application.use_cases.delete_tool_server import DeleteToolServer, DeleteToolServerCommand
from application.use_cases.list_tool_servers import ListToolServers, ListToolServersQuery
from application.use_cases.refresh_tool_server import (
    RefreshToolServer,
    RefreshToolServerCommand,
)
from domain.errors import DomainError, Invalid, field_error
from domain.identity import Caller
from domain.tool_servers import ToolServer
from entrypoints.cli_scope import admin_scope
from entrypoints.config import Settings
from entrypoints.database import Database
from entrypoints.http.tool_schemas import ToolServerOut

HEADER_INVALID = "Each --header is 'Name: value'"


def add_tool_commands(commands: Any) -> None:
    """The `tools` command and its subcommands, on the CLI's subparsers."""
    tools = commands.add_parser(
        "tools", help="tool servers (MCP servers, OpenAPI documents) for agents"
    ).add_subparsers(dest="tools_command", required=True)
    add = tools.add_parser("add", help="register a tool server and discover its tools")
    add.add_argument("name", help="lower-case letters, digits and single hyphens")
    add.add_argument("url", help="the MCP endpoint, or the OpenAPI document's URL")
    add.add_argument("--kind", choices=("mcp", "openapi"), default="mcp")
    add.add_argument("--description", default="")
    add.add_argument(
        "--header", action="append", default=[], metavar="'NAME: VALUE'",
        help="a header sent with every request (a secret: sealed, never shown); repeatable",
    )  # fmt: skip
    add.add_argument(
        "--approval", default="never", metavar="never|always|TOOL[,TOOL…]",
        help="which calls wait for a member's approval (default: never)",
    )  # fmt: skip
    listing = tools.add_parser("list", help="list the organization's tool servers")
    refresh = tools.add_parser("refresh", help="ask a tool server for its tools again")
    remove = tools.add_parser("remove", help="delete a tool server (agents lose its tools)")
    for sub in (refresh, remove):
        sub.add_argument("tool_server_id", type=int, metavar="TOOL_SERVER_ID")
    for sub in (add, listing, refresh, remove):
        sub.add_argument("--org", required=True, help="organization id to act in")
        sub.add_argument("--user", default="cli", help="user id to act as (default: cli)")
        sub.add_argument("--json", action="store_true", help="print the records as JSON")


def parse_headers(values: list[str]) -> dict[str, str]:
    """`--header 'Name: value'` options as a header object (its rules are the use case's)."""
    headers: dict[str, str] = {}
    for value in values:
        name, colon, rest = value.partition(":")
        if not colon or not name.strip():
            raise Invalid(HEADER_INVALID, [field_error("headers", HEADER_INVALID)])
        headers[name.strip()] = rest.strip()
    return headers


def parse_approval(value: str) -> object:
    """`never`, `always`, or a comma-separated list of tool names."""
    if value in ("never", "always"):
        return value
    return [name.strip() for name in value.split(",") if name.strip()]


async def run_tools(settings: Settings, database: Database, args: argparse.Namespace) -> int:
    """Run `tools add|list|refresh|remove` as `args` say; the process's exit code."""
    try:
        async with admin_scope(settings, database, args) as (scope, caller):
            if args.tools_command == "list":
                servers = await (await scope.get(ListToolServers)).execute(
                    ListToolServersQuery.parse(caller=caller)
                )
                _print(servers, as_json=args.json, one=False)
                return 0
            if args.tools_command == "remove":
                await (await scope.get(DeleteToolServer)).execute(
                    DeleteToolServerCommand.parse(caller=caller, tool_server_id=args.tool_server_id)
                )
                print(json.dumps({"deleted": args.tool_server_id}) if args.json else "deleted")
                return 0
            server = await _add_or_refresh(scope, caller, args)
            _print([server], as_json=args.json, one=True)
            if server.status == "error":
                print(f"warning: {server.error}", file=sys.stderr)
            return 0
    except DomainError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return 1


async def _add_or_refresh(scope: Any, caller: Caller, args: argparse.Namespace) -> ToolServer:
    if args.tools_command == "refresh":
        refresh: RefreshToolServer = await scope.get(RefreshToolServer)
        return await refresh.execute(
            RefreshToolServerCommand.parse(caller=caller, tool_server_id=args.tool_server_id)
        )
    create: CreateToolServer = await scope.get(CreateToolServer)
    return await create.execute(
        CreateToolServerCommand.parse(
            caller=caller,
            name=args.name,
            kind=args.kind,
            url=args.url,
            description=args.description,
            headers=parse_headers(args.header),
            require_approval=parse_approval(args.approval),
        )
    )


def _print(servers: list[ToolServer], *, as_json: bool, one: bool) -> None:
    records = [msgspec.to_builtins(ToolServerOut.of(server)) for server in servers]
    if as_json:
        print(json.dumps(records[0] if one else records, indent=2))
        return
    for record in records:
        tools = ", ".join(tool["name"] for tool in record["tools"]) or "-"
        print(
            f"{record['id']:>6}  {record['status']:<5}  {record['kind']:<7}  {record['name']:<24}"
            f"  {record['url']}\n        tools: {tools}"
        )
