"""Fakes of the tool server ports: a `ToolServerRepository` in memory (organization scoping,
name uniqueness, the outcome of discoveries), a `SecretBox` that really seals (so that a test
can see no header value is kept in clear), and a scriptable `ToolConnector`."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from application.ports.tool_connector import (
    AddressNotAllowed,
    ToolEndpoint,
    ToolOutput,
    ToolServerUnreachable,
)
from application.ports.tool_server_repository import Discovery, NewToolServer
from domain.errors import Conflict, NotFound
from domain.tool_servers import (
    TOOL_SERVER_NAME_TAKEN,
    TOOL_SERVER_NOT_FOUND,
    ToolDefinition,
    ToolServer,
)

if TYPE_CHECKING:
    from application.ports.secret_box import SecretBox
    from application.ports.tool_connector import ToolConnector
    from application.ports.tool_server_repository import ToolServerRepository
    from tests.fakes.basics import Restorable

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
NOT_REFRESHED = "Not refreshed yet"

ToolServersState = tuple[dict[int, ToolServer], dict[int, bytes | None], int, int]


def tool(name: str, description: str = "", **properties: Any) -> ToolDefinition:
    """A tool definition whose arguments are `properties` (JSON Schemas by name)."""
    return ToolDefinition(
        name=name,
        description=description or f"The {name} tool",
        input_schema={"type": "object", "properties": properties},
    )


class FakeToolServerRepository:
    """Servers as `ToolServer` values by id, their sealed headers apart; `agent_tools` stands
    for the agents' grants (agent id to `[{toolServerId, names}]`) that `delete` cleans."""

    def __init__(self) -> None:
        self.rows: dict[int, ToolServer] = {}
        self.sealed: dict[int, bytes | None] = {}
        self.agent_tools: dict[int, list[dict[str, Any]]] = {}
        self._next = 1
        self._clock = 0

    def snapshot(self) -> ToolServersState:
        return copy.deepcopy((self.rows, self.sealed, self._next, self._clock))

    def restore(self, saved: ToolServersState) -> None:
        self.rows, self.sealed, self._next, self._clock = copy.deepcopy(saved)

    def _tick(self) -> datetime:
        self._clock += 1
        return EPOCH + timedelta(seconds=self._clock)

    def _own(self, org_id: str, server_id: int) -> ToolServer | None:
        server = self.rows.get(server_id)
        return server if server is not None and server.org_id == org_id else None

    def _check_name(self, org_id: str, name: str, server_id: int | None = None) -> None:
        for other in self.rows.values():
            if other.org_id == org_id and other.name == name and other.id != server_id:
                raise Conflict(TOOL_SERVER_NAME_TAKEN)

    async def add(self, org_id: str, user_id: str, server: NewToolServer) -> ToolServer:
        self._check_name(org_id, server.name)
        at = self._tick()
        row = ToolServer(
            id=self._next, org_id=org_id, user_id=user_id, name=server.name, kind=server.kind,
            url=server.url, description=server.description, header_names=server.header_names,
            require_approval=server.require_approval, enabled=server.enabled, status="error",
            error=NOT_REFRESHED, tools=(), refreshed_at=None, created_at=at, updated_at=at,
        )  # fmt: skip
        self._next += 1
        self.rows[row.id] = row
        self.sealed[row.id] = server.sealed_headers
        return row

    async def get(self, org_id: str, server_id: int) -> ToolServer | None:
        return self._own(org_id, server_id)

    async def list(
        self, org_id: str, server_ids: Sequence[int] | None = None, *, lock: bool = False
    ) -> list[ToolServer]:
        found = [
            s
            for s in self.rows.values()
            if s.org_id == org_id and (server_ids is None or s.id in server_ids)
        ]
        return sorted(found, key=lambda s: s.name)

    async def sealed_headers(self, org_id: str, server_id: int) -> bytes | None:
        return self.sealed.get(server_id) if self._own(org_id, server_id) else None

    async def replace(self, org_id: str, server_id: int, server: NewToolServer) -> ToolServer:
        current = self._own(org_id, server_id)
        if current is None:
            raise NotFound(TOOL_SERVER_NOT_FOUND)
        self._check_name(org_id, server.name, server_id)
        fields = {f.name: getattr(server, f.name) for f in dataclasses.fields(server)}
        self.sealed[server_id] = fields.pop("sealed_headers")
        row = dataclasses.replace(current, **fields, updated_at=self._tick())
        self.rows[server_id] = row
        return row

    async def record_discovery(self, org_id: str, server_id: int, found: Discovery) -> ToolServer:
        current = self._own(org_id, server_id)
        if current is None:
            raise NotFound(TOOL_SERVER_NOT_FOUND)
        if found.tools is not None:
            row = dataclasses.replace(
                current, status="ready", error=None, tools=tuple(found.tools),
                refreshed_at=found.at, updated_at=self._tick(),
            )  # fmt: skip
        else:
            row = dataclasses.replace(
                current, status="error", error=found.error or "Unknown error",
                refreshed_at=found.at, updated_at=self._tick(),
            )  # fmt: skip
        self.rows[server_id] = row
        return row

    async def delete(self, org_id: str, server_id: int) -> bool:
        if self._own(org_id, server_id) is None:
            return False
        del self.rows[server_id]
        self.sealed.pop(server_id, None)
        for agent_id, grants in self.agent_tools.items():
            self.agent_tools[agent_id] = [g for g in grants if g["toolServerId"] != server_id]
        return True


class FakeSecretBox:
    """Seals by XOR with a key byte under a tag naming the key: not secure, but no plaintext
    survives in a token, a changed token is refused, and `keys` rotate as the real box's do
    (the first seals, all open)."""

    def __init__(self, *keys: int) -> None:
        self.keys = keys or (0x5A,)

    def seal(self, plaintext: bytes) -> bytes:
        key = self.keys[0]
        body = bytes(b ^ key for b in plaintext)
        return b"fake:%d:%d:" % (key, sum(body) % 65_521) + body

    def open(self, token: bytes) -> bytes:
        try:
            _, key_text, check, body = token.split(b":", 3)
            key = int(key_text)
        except ValueError:
            raise ValueError("not a sealed token") from None
        if key not in self.keys or int(check) != sum(body) % 65_521:
            raise ValueError("the sealed value was changed or no configured key opens it")
        return bytes(b ^ key for b in body)


Script = Callable[[ToolEndpoint], Sequence[ToolDefinition]]


UNRESOLVED = "The tool server's host does not resolve"


class FakeToolConnector:
    """A `ToolConnector` scripted per URL: `tools[url]` is what discovery finds (a list, or a
    function of the endpoint), `failures[url]` the message of a server that cannot be reached,
    `refused` the URLs (or hosts) whose address is not allowed, `results[(url, tool)]` what a
    call returns (a `ToolOutput`, a function of the arguments, or an exception to raise).
    Every endpoint asked is kept in `discovered` and every call in `calls`."""

    def __init__(self) -> None:
        self.tools: dict[str, Sequence[ToolDefinition] | Script] = {}
        self.failures: dict[str, str] = {}
        self.refused: set[str] = set()
        self.unresolved: set[str] = set()
        self.results: dict[tuple[str, str], Any] = {}
        self.discovered: list[ToolEndpoint] = []
        self.checked: list[str] = []
        self.calls: list[tuple[ToolEndpoint, str, dict[str, Any]]] = []

    def _refused(self, url: str) -> bool:
        return url in self.refused or (urlsplit(url).hostname or "") in self.refused

    async def check_address(self, url: str) -> None:
        self.checked.append(url)
        if self._refused(url):
            raise AddressNotAllowed(f"The address of {url} is not allowed")
        if url in self.unresolved:
            raise ToolServerUnreachable(UNRESOLVED)

    async def discover(self, endpoint: ToolEndpoint) -> list[ToolDefinition]:
        self.discovered.append(endpoint)
        if self._refused(endpoint.url):
            raise AddressNotAllowed(f"The address of {endpoint.url} is not allowed")
        if endpoint.url in self.failures:
            raise ToolServerUnreachable(self.failures[endpoint.url])
        if endpoint.url in self.unresolved:
            raise ToolServerUnreachable(UNRESOLVED)
        found = self.tools.get(endpoint.url, [])
        return list(found(endpoint) if callable(found) else found)

    async def call(
        self, endpoint: ToolEndpoint, tool: ToolDefinition, arguments: dict[str, Any]
    ) -> ToolOutput:
        self.calls.append((endpoint, tool.name, arguments))
        if self._refused(endpoint.url):
            raise AddressNotAllowed(f"The address of {endpoint.url} is not allowed")
        if endpoint.url in self.failures:
            raise ToolServerUnreachable(self.failures[endpoint.url])
        result = self.results.get((endpoint.url, tool.name))
        if isinstance(result, BaseException):
            raise result
        if callable(result):
            result = result(arguments)
        if result is None:
            return ToolOutput(content=[{"type": "text", "text": f"{tool.name} done"}])
        assert isinstance(result, ToolOutput)
        return result


if TYPE_CHECKING:  # mypy checks the fakes against the ports they stand in for
    _servers: ToolServerRepository = FakeToolServerRepository()
    _servers_store: Restorable[ToolServersState] = FakeToolServerRepository()
    _box: SecretBox = FakeSecretBox()
    _connector: ToolConnector = FakeToolConnector()
