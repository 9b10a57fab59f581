"""`HttpToolConnector` against real servers on 127.0.0.1 (tests/integration/tool_servers_support):
an MCP server (the SDK's own, tools/list paged) and a Litestar API with its OpenAPI document.
Nothing here sends a packet anywhere but 127.0.0.1: refused addresses are refused before any
connection, which a spy on the network backend shows."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import httpcore2
import pytest

from adapters.tools.connector import HttpToolConnector
from application.ports.tool_connector import (
    AddressNotAllowed,
    ToolEndpoint,
    ToolServerUnreachable,
)
from domain.tool_servers import ADDRESS_NOT_ALLOWED, ToolDefinition
from tests.conftest import free_port
from tests.integration import tool_servers_support as support


@dataclass
class Servers:
    mcp: str
    api: str
    raw: str
    refused_port: int
    mcp_sse: str


@pytest.fixture(scope="module")
async def servers() -> AsyncIterator[Servers]:
    refused_port = free_port()
    async with (
        support.serving(support.mcp_app()) as mcp,
        support.serving(support.openapi_app()) as api,
        support.serving(support.raw_app(f"http://127.0.0.2:{refused_port}/mcp")) as raw,
        support.serving(support.mcp_app(json_response=False)) as mcp_sse,
    ):
        yield Servers(
            mcp=f"{mcp}/mcp",
            api=f"{api}/schema/openapi.json",
            raw=raw,
            refused_port=refused_port,
            mcp_sse=f"{mcp_sse}/mcp",
        )


def sdk_tasks() -> list[asyncio.Task[Any]]:
    """The tasks left running by the MCP SDK's client or the HTTP stack."""
    return [
        task
        for task in asyncio.all_tasks()
        if any(
            part in task.get_coro().cr_code.co_filename  # type: ignore[union-attr]
            for part in ("mcp/client", "mcp/shared", "httpcore2", "httpx2")
        )
    ]


class SpyBackend(httpcore2.AsyncNetworkBackend):
    """The real backend, noting every address it is asked to connect to."""

    def __init__(self) -> None:
        self.inner = httpcore2.AnyIOBackend()
        self.connected: list[str] = []

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore2's signature)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        assert host == "127.0.0.1", f"a connection to {host} was attempted"
        self.connected.append(host)
        return await self.inner.connect_tcp(host, port, timeout=timeout)

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class FakeDns:
    """A resolver with fixed answers, noting what it was asked."""

    def __init__(self, answers: dict[str, Sequence[str]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.asked.append(host)
        if host not in self.answers:
            raise OSError("no such host")
        return self.answers[host]


DNS = {
    "tools.test": ["127.0.0.1"],
    "rebound.test": ["127.0.0.2"],
    "private.test": ["10.0.0.1"],
    "mixed.test": ["127.0.0.1", "10.0.0.1"],
}


def connector(**options: Any) -> tuple[HttpToolConnector, SpyBackend, FakeDns]:
    spy, dns = SpyBackend(), FakeDns(DNS)
    options.setdefault("allowed_hosts", ("127.0.0.1",))
    options.setdefault("timeout", 5.0)
    made = HttpToolConnector(resolver=dns, network_backend=spy, **options)
    return made, spy, dns


def mcp(url: str, **headers: str) -> ToolEndpoint:
    return ToolEndpoint(kind="mcp", url=url, headers=headers)


def tool(name: str) -> ToolDefinition:
    return ToolDefinition(name=name, description="", input_schema={"type": "object"})


# MCP


async def test_mcp_discovery_reads_every_page(servers: Servers) -> None:
    made, spy, _ = connector()
    tools = await made.discover(mcp(servers.mcp, Authorization="Bearer secret"))
    assert [t.name for t in tools] == [t.name for t in support.TOOLS]
    assert len(tools) > 3 * support.PAGE_SIZE
    echo = tools[0]
    assert echo.description == "Echoes its text"
    assert echo.input_schema["properties"] == {"text": {"type": "string"}}
    assert spy.connected
    await made.aclose()


async def test_mcp_call_maps_the_content(servers: Servers) -> None:
    made, _, _ = connector()
    endpoint = mcp(servers.mcp)
    echoed = await made.call(endpoint, tool("echo"), {"text": "hello"})
    assert echoed.content == [{"type": "text", "text": "hello"}]
    assert not echoed.is_error

    image = await made.call(endpoint, tool("image"), {})
    assert image.content == [
        {"type": "image", "mediaType": "image/png", "url": f"data:image/png;base64,{support.PNG}"}
    ]

    resources = await made.call(endpoint, tool("resources"), {})
    texts = [part["text"] for part in resources.content]
    assert texts[0] == "memo text"
    assert "image/png" in texts[1] and "72 bytes" in texts[1]
    assert "memo://3" in texts[2]

    weather = await made.call(endpoint, tool("weather"), {"city": "Oslo"})
    assert weather.structured == {"city": "Oslo", "celsius": 21}

    refused = await made.call(endpoint, tool("refuse"), {})
    assert refused.is_error and refused.content == [{"type": "text", "text": "no such city"}]
    await made.aclose()


async def test_a_raising_tool_is_an_unreachable_server(servers: Servers) -> None:
    made, _, _ = connector()
    with pytest.raises(ToolServerUnreachable) as raised:
        await made.call(mcp(servers.mcp), tool("fail"), {})
    # What the server chose to say of it, on one line, and no traceback of ours.
    assert raised.value.message.startswith("The tool server answered an error: the tool broke")
    assert "Traceback" not in raised.value.message and "\n" not in raised.value.message


async def test_a_slow_tool_times_out(servers: Servers) -> None:
    made, _, _ = connector(timeout=0.5)
    started = time.monotonic()
    with pytest.raises(ToolServerUnreachable, match=r"did not answer within 0\.5 s"):
        await made.call(mcp(servers.mcp), tool("slow"), {})
    # The bound holds within a margin for a loaded machine (the slow tool takes 5 s).
    assert time.monotonic() - started < 4


@pytest.mark.parametrize("answers", ["json", "sse"])
async def test_a_result_over_the_cap_is_refused(servers: Servers, answers: str) -> None:
    url = servers.mcp if answers == "json" else servers.mcp_sse
    made, _, _ = connector(max_response_bytes=100_000)
    with pytest.raises(ToolServerUnreachable, match="more than 100000 bytes"):
        await made.call(mcp(url), tool("big"), {})
    # The connector still works after it.
    assert (await made.call(mcp(url), tool("echo"), {"text": "a"})).content


async def test_an_sse_answering_server(servers: Servers) -> None:
    made, _, _ = connector()
    assert len(await made.discover(mcp(servers.mcp_sse))) == len(support.TOOLS)
    image = await made.call(mcp(servers.mcp_sse), tool("image"), {})
    assert image.content[0]["type"] == "image"
    hasty, _, _ = connector(timeout=0.5)
    with pytest.raises(ToolServerUnreachable, match="did not answer within"):
        await hasty.call(mcp(servers.mcp_sse), tool("slow"), {})


async def test_failures_leave_no_task_behind(servers: Servers) -> None:
    made, _, _ = connector(timeout=0.3, max_response_bytes=100_000)
    for name in ("slow", "big", "fail"):
        for url in (servers.mcp, servers.mcp_sse):
            with pytest.raises(ToolServerUnreachable):
                await made.call(mcp(url), tool(name), {})
    with pytest.raises(ToolServerUnreachable):
        await made.discover(mcp(f"http://127.0.0.1:{servers.refused_port}/mcp"))
    for _ in range(100):  # up to 5 s for the cancelled tasks to finish on a loaded machine
        if not sdk_tasks():
            break
        await asyncio.sleep(0.05)
    assert sdk_tasks() == []


async def test_http_errors_and_nonsense_are_unreachable_servers(servers: Servers) -> None:
    made, _, _ = connector()
    with pytest.raises(ToolServerUnreachable, match="HTTP 503"):
        await made.discover(mcp(f"{servers.raw}/broken"))
    with pytest.raises(ToolServerUnreachable, match="not valid MCP"):
        await made.discover(mcp(f"{servers.raw}/nonsense"))
    with pytest.raises(ToolServerUnreachable, match="HTTP 404"):
        await made.discover(mcp(f"{servers.raw}/nowhere"))


async def test_a_server_that_is_gone(servers: Servers) -> None:
    made, _, _ = connector()
    async with support.serving(support.mcp_app()) as base:
        assert await made.discover(mcp(f"{base}/mcp"))
    with pytest.raises(ToolServerUnreachable, match="Could not connect"):
        await made.discover(mcp(f"{base}/mcp"))


# Outbound safety


async def test_an_address_not_listed_is_refused_before_any_connection(servers: Servers) -> None:
    made, spy, _ = connector()
    url = f"http://127.0.0.2:{free_port()}/mcp"
    with pytest.raises(AddressNotAllowed, match=ADDRESS_NOT_ALLOWED):
        await made.check_address(url)
    with pytest.raises(AddressNotAllowed, match=ADDRESS_NOT_ALLOWED):
        await made.discover(mcp(url))
    with pytest.raises(AddressNotAllowed):
        await made.call(ToolEndpoint(kind="openapi", url=url), tool("x"), {})
    assert spy.connected == []


@pytest.mark.parametrize("host", ["rebound.test", "private.test", "mixed.test"])
async def test_a_name_resolving_to_a_refused_address_is_refused(
    servers: Servers, host: str
) -> None:
    made, spy, dns = connector()
    port = servers.mcp.split(":")[2].split("/")[0]
    url = f"http://{host}:{port}/mcp"
    with pytest.raises(AddressNotAllowed):
        await made.check_address(url)
    with pytest.raises(AddressNotAllowed):
        await made.discover(mcp(url))
    assert host in dns.asked
    assert spy.connected == []


async def test_a_name_is_resolved_once_per_connection_and_its_checked_address_used(
    servers: Servers,
) -> None:
    made, spy, dns = connector()
    port = servers.mcp.split(":")[2].split("/")[0]
    tools = await made.discover(mcp(f"http://tools.test:{port}/mcp"))
    assert tools and "tools.test" in dns.asked
    assert set(spy.connected) == {"127.0.0.1"}


async def test_a_listed_host_name_allows_what_it_resolves_to(servers: Servers) -> None:
    made, _, _ = connector(allowed_hosts=("private.test",))
    await made.check_address("https://private.test/mcp")
    with pytest.raises(AddressNotAllowed):
        await made.check_address("https://rebound.test/mcp")


async def test_other_schemes_and_unresolvable_names(servers: Servers) -> None:
    made, _, _ = connector()
    for url in ("ftp://127.0.0.1/x", "file:///etc/passwd", "127.0.0.1:80", "http://"):
        with pytest.raises(AddressNotAllowed):
            await made.check_address(url)
    with pytest.raises(ToolServerUnreachable, match="cannot be resolved"):
        await made.check_address("http://unknown.test/")


async def test_a_redirect_to_another_host_is_not_followed(servers: Servers) -> None:
    made, spy, _ = connector()
    with pytest.raises(ToolServerUnreachable) as raised:
        await made.discover(mcp(f"{servers.raw}/away"))
    assert "127.0.0.2" not in "".join(spy.connected)
    assert not isinstance(raised.value, AddressNotAllowed)
    with pytest.raises(ToolServerUnreachable, match="HTTP 307"):
        await made.discover(ToolEndpoint(kind="openapi", url=f"{servers.raw}/away"))
    assert spy.connected and set(spy.connected) == {"127.0.0.1"}


# OpenAPI


def openapi_endpoint(servers: Servers) -> ToolEndpoint:
    return ToolEndpoint(kind="openapi", url=servers.api, headers={"X-Api-Key": "k"})


async def test_openapi_discovery(servers: Servers) -> None:
    made, _, _ = connector()
    tools = {t.name: t for t in await made.discover(openapi_endpoint(servers))}
    assert set(tools) == {"getPet", "searchPets", "createPet", "plainText", "moved"}
    get_pet = tools["getPet"].input_schema
    assert set(get_pet["properties"]) == {"pet_id", "verbose"}
    assert get_pet["required"] == ["pet_id"]
    assert tools["searchPets"].input_schema["required"] == ["q"]
    body = tools["createPet"].input_schema["properties"]["body"]
    assert "$ref" not in str(body) and body["properties"]["name"]["type"] == "string"
    assert tools["createPet"].input_schema["required"] == ["body"]
    assert tools["getPet"].description == "One pet"


async def test_openapi_calls(servers: Servers) -> None:
    made, _, _ = connector()
    endpoint = openapi_endpoint(servers)
    pet = await made.call(endpoint, tool("getPet"), {"pet_id": 7, "verbose": True})
    assert pet.structured == {"id": 7, "name": "pet-7", "verbose": True}
    assert not pet.is_error and '"pet-7"' in pet.content[0]["text"]

    found = await made.call(endpoint, tool("searchPets"), {"q": "cat", "limit": 2})
    assert found.structured == [{"name": "cat-0"}, {"name": "cat-1"}]

    created = await made.call(endpoint, tool("createPet"), {"body": {"name": "Rex"}})
    assert created.structured == {"created": "Rex", "tags": []}

    plain = await made.call(endpoint, tool("plainText"), {})
    assert plain.content == [{"type": "text", "text": "just text"}]

    missing = await made.call(endpoint, tool("getPet"), {"pet_id": 404})
    assert missing.is_error and "HTTP 404" in missing.content[0]["text"]

    bad = await made.call(endpoint, tool("searchPets"), {})
    assert bad.is_error and "q is required" in bad.content[0]["text"]

    moved = await made.call(endpoint, tool("moved"), {})
    assert moved.is_error and "HTTP 30" in moved.content[0]["text"]

    with pytest.raises(ToolServerUnreachable, match="no longer offers"):
        await made.call(endpoint, tool("deletePet"), {})


async def test_openapi_documents_that_are_not(servers: Servers) -> None:
    made, _, _ = connector(max_response_bytes=100_000)
    with pytest.raises(ToolServerUnreachable, match="more than 100000 bytes"):
        await made.discover(ToolEndpoint(kind="openapi", url=f"{servers.raw}/huge"))
    with pytest.raises(ToolServerUnreachable, match="HTTP 503"):
        await made.discover(ToolEndpoint(kind="openapi", url=f"{servers.raw}/broken"))


async def test_headers_go_only_to_the_documents_host(servers: Servers) -> None:
    made, _, _ = connector()
    url = f"{servers.raw}/elsewhere.json"
    with pytest.raises(ToolServerUnreachable, match="not on the document's host"):
        await made.discover(ToolEndpoint(kind="openapi", url=url, headers={"X-Key": "k"}))
    # Without credentials to give away, the API may live elsewhere.
    assert [t.name for t in await made.discover(ToolEndpoint(kind="openapi", url=url))] == ["ping"]


async def test_a_compressed_answer_is_refused_before_it_is_inflated(servers: Servers) -> None:
    made, _, _ = connector(max_response_bytes=1_000_000)
    for endpoint in (
        ToolEndpoint(kind="openapi", url=f"{servers.raw}/bomb"),
        mcp(f"{servers.raw}/bomb"),
    ):
        with pytest.raises(ToolServerUnreachable, match="compressed body"):
            await made.discover(endpoint)
