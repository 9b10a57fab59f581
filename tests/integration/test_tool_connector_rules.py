"""The connector's rules without any traffic: which addresses are public, what the allow-list
allows, and how an OpenAPI document becomes tools (cycles cut, nothing fetched)."""

from __future__ import annotations

import ipaddress
import json
import urllib.request
from typing import Any

import pytest

from adapters.tools import openapi
from adapters.tools.addresses import AddressPolicy, allowed_addresses, is_public
from application.ports.tool_connector import AddressNotAllowed, ToolServerUnreachable

REFUSED = [
    "127.0.0.1",
    "127.0.0.2",
    "10.0.0.1",
    "172.16.5.4",
    "192.168.1.1",
    "100.64.0.1",  # shared (carrier-grade NAT)
    "169.254.169.254",  # link-local (cloud metadata)
    "224.0.0.1",
    "239.1.1.1",
    "240.0.0.1",
    "255.255.255.255",
    "0.0.0.0",
    "192.0.2.1",
    "198.18.0.1",
    "::1",
    "::",
    "fe80::1",
    "fec0::1",  # site-local
    "fc00::1",
    "ff02::1",
    "2001:db8::1",
    "::ffff:10.0.0.1",
    "::ffff:127.0.0.1",
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "2002:a00:1::",  # 6to4 of 10.0.0.1
]
PUBLIC = ["8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "::ffff:8.8.8.8", "64:ff9b::808:808"]


@pytest.mark.parametrize("text", REFUSED)
def test_not_public(text: str) -> None:
    assert not is_public(ipaddress.ip_address(text))
    assert not AddressPolicy().allows("example.test", ipaddress.ip_address(text))


@pytest.mark.parametrize("text", PUBLIC)
def test_public(text: str) -> None:
    assert is_public(ipaddress.ip_address(text))


def test_the_allow_list() -> None:
    policy = AddressPolicy(["127.0.0.1", "10.1.0.0/16", "Internal.Example.", " ", "::1"])
    ip = ipaddress.ip_address
    assert policy.allows("x.test", ip("127.0.0.1"))
    assert policy.allows("x.test", ip("::ffff:127.0.0.1"))
    assert not policy.allows("x.test", ip("127.0.0.2"))
    assert policy.allows("x.test", ip("10.1.200.3"))
    assert not policy.allows("x.test", ip("10.2.0.1"))
    assert policy.allows("internal.example", ip("10.9.9.9"))
    assert policy.allows("INTERNAL.example.", ip("192.168.0.1"))
    assert not policy.allows("other.example", ip("192.168.0.1"))
    assert policy.allows("x.test", ip("::1"))


async def test_one_refused_answer_refuses_the_name() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["8.8.8.8", "10.0.0.1"]

    with pytest.raises(AddressNotAllowed):
        await allowed_addresses("mixed.test", 443, AddressPolicy(), resolver)

    async def public(host: str, port: int) -> list[str]:
        return ["8.8.8.8", "8.8.8.8", "2001:4860:4860::8888"]

    assert await allowed_addresses("ok.test", 443, AddressPolicy(), public) == [
        "8.8.8.8",
        "2001:4860:4860::8888",
    ]


def _document(**extra: Any) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "/v{major}", "variables": {"major": {"default": "2"}}}],
        "paths": {
            "/nodes/{id}": {
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "put": {
                    "operationId": "putNode",
                    "summary": "Replace a node",
                    "parameters": [
                        {"$ref": "#/components/parameters/Trace"},
                        {"name": "Accept", "in": "header", "schema": {"type": "string"}},
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Node"}}
                        },
                    },
                    "responses": {"200": {"description": "ok"}},
                },
                "get": {"summary": "no operationId", "responses": {"200": {"description": "ok"}}},
            }
        },
        "components": {
            "parameters": {
                "Trace": {"name": "X-Trace", "in": "header", "schema": {"type": "boolean"}}
            },
            "schemas": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "children": {
                            "type": "array",
                            "items": {"$ref": "#/components/schemas/Node"},
                        },
                    },
                }
            },
        },
        **extra,
    }


def test_operations_become_tools_with_refs_inlined_and_cycles_cut() -> None:
    url = "https://api.example.test/docs/openapi.json"
    document = openapi.parse_document(json.dumps(_document()).encode(), url)
    [operation] = openapi.operations(document, url)
    assert operation.base_url == "https://api.example.test/v2"
    schema = operation.tool.input_schema
    assert operation.tool.name == "putNode" and operation.tool.description == "Replace a node"
    assert set(schema["properties"]) == {"id", "X-Trace", "body"}
    assert schema["required"] == ["id", "body"]
    node = schema["properties"]["body"]
    assert node["properties"]["children"]["items"] == {}  # the cycle, cut
    assert "$ref" not in json.dumps(schema)

    request = openapi.build_request(
        operation, {"id": "a/b c", "X-Trace": True, "body": {"name": "n"}}
    )
    assert request.url == "https://api.example.test/v2/nodes/a%2Fb%20c"
    assert request.headers == {"X-Trace": "true"}
    assert request.json_body == {"name": "n"}
    with pytest.raises(openapi.BadArguments):
        openapi.build_request(operation, {"id": "x"})
    # A dot segment would climb to paths no tool offers.
    for climbing in (".", "..", ""):
        with pytest.raises(openapi.BadArguments, match="cannot be"):
            openapi.build_request(operation, {"id": climbing, "body": {}})


def test_yaml_documents_without_aliases() -> None:
    url = "https://api.example.test/openapi.yaml"
    import yaml

    text = yaml.safe_dump(_document())
    assert openapi.parse_document(text.encode(), url)["openapi"] == "3.1.0"
    bomb = "openapi: 3.1.0\na: &a [1, 2]\nb: [*a, *a]\n"
    with pytest.raises(ToolServerUnreachable, match="neither JSON nor YAML"):
        openapi.parse_document(bomb.encode(), url)


def test_documents_that_are_not_openapi_3() -> None:
    url = "https://api.example.test/openapi.json"
    for body in (b"[1]", b'{"swagger": "2.0"}', b'{"openapi": "3.1.0"}', b"\xff\xfe{"):
        with pytest.raises(ToolServerUnreachable):
            openapi.parse_document(body, url)


def test_nothing_is_fetched_for_a_reference_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fetching(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a document was fetched")

    monkeypatch.setattr(urllib.request, "urlopen", no_fetching)
    try:
        import requests

        monkeypatch.setattr(requests, "get", no_fetching)
    except ImportError:
        pass
    document = _document()
    document["components"]["schemas"]["Node"] = {"$ref": "http://10.0.0.1/node.json"}
    url = "https://api.example.test/openapi.json"
    with pytest.raises(ToolServerUnreachable):
        openapi.parse_document(json.dumps(document).encode(), url)
    # Its operations, were it valid, would treat the unresolvable reference as any value.
    [operation] = openapi.operations(document, url)
    assert operation.tool.input_schema["properties"]["body"] == {}


def test_a_servers_tool_descriptions_and_schemas_are_bounded() -> None:
    from adapters.tools.connector import DESCRIPTION_CHARS, _bounded_tool
    from domain.tool_servers import ToolDefinition

    huge = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(5000)}}
    tool = _bounded_tool(ToolDefinition(name="t", description="d" * 10_000, input_schema=huge))
    assert len(tool.description) == DESCRIPTION_CHARS
    assert tool.input_schema["type"] == "object" and "properties" not in tool.input_schema
    small = ToolDefinition(name="t", description="d", input_schema={"type": "object"})
    assert _bounded_tool(small) == small
