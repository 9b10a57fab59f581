"""HTTP APIs described by an OpenAPI 3 document: its operations as tools, and their calls.

The document is validated by openapi-spec-validator, its `$ref`s resolved by `referencing`
within the document only: nothing is ever fetched but the document itself (through the
guarded client), since a reference elsewhere would be a request around the address check.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import yaml
from jsonschema_path import SchemaPath
from openapi_spec_validator.shortcuts import get_validator_cls
from openapi_spec_validator.validation.exceptions import ValidatorDetectError
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable

from adapters.skills.front_matter import _StrictSafeLoader
from application.ports.tool_connector import ToolOutput, ToolServerUnreachable
from domain.tool_servers import MAX_TOOLS_PER_SERVER, ToolDefinition

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
MAX_SCHEMA_DEPTH = 16
MAX_SCHEMA_NODES = 4000
ERROR_PREVIEW = 2000
_IGNORED_HEADERS = {
    "accept",
    "content-type",
    "authorization",
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
}
"""Header parameters not offered: those OpenAPI says to ignore, and those HTTP itself sets."""


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str
    location: str
    required: bool
    schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation with an `operationId`: how to call it and the tool it is offered as."""

    method: str
    path: str
    base_url: str
    parameters: tuple[Parameter, ...]
    body_schema: dict[str, Any] | None
    body_required: bool
    tool: ToolDefinition


def _refuse_retrieval(uri: str) -> Any:
    raise ToolServerUnreachable("The OpenAPI document refers to another document")


class _NoRetrieval(dict[str, Callable[[str], Any]]):
    """Handlers for every URI scheme that fetch nothing: jsonschema-path falls back to urllib
    for a scheme it has no handler for."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> Callable[[str], Any]:
        return _refuse_retrieval


def parse_document(body: bytes, url: str) -> dict[str, Any]:
    """The document as data (JSON, else YAML without aliases), validated as OpenAPI 3."""
    try:
        document = json.loads(body)
    except ValueError:
        try:
            document = yaml.load(body.decode("utf-8"), Loader=_StrictSafeLoader)  # noqa: S506 (a strict safe loader)
        except (yaml.YAMLError, UnicodeDecodeError, RecursionError):
            raise ToolServerUnreachable("The OpenAPI document is neither JSON nor YAML") from None
    if not isinstance(document, dict) or not str(document.get("openapi", "")).startswith("3."):
        raise ToolServerUnreachable("The document is not an OpenAPI 3 document")
    try:
        validator = get_validator_cls(document)
        validator(SchemaPath.from_dict(document, base_uri=url, handlers=_NoRetrieval())).validate()
    except ToolServerUnreachable:
        raise
    except ValidatorDetectError:
        raise ToolServerUnreachable("The document is not an OpenAPI 3 document") from None
    except Exception as error:
        message = " ".join(str(getattr(error, "message", error)).split())[:200]
        raise ToolServerUnreachable(f"The OpenAPI document is not valid: {message}") from None
    return document


class _Inliner:
    """Copies schemas with their internal `$ref`s replaced by what they point to; a cycle, a
    depth beyond `MAX_SCHEMA_DEPTH` or more than `MAX_SCHEMA_NODES` nodes is cut to `{}`."""

    def __init__(self, document: dict[str, Any], url: str) -> None:
        self._resolver = Registry().with_resource(url, Resource.opaque(document)).resolver(url)
        self._nodes = 0

    def resolve(self, value: Any) -> Any:
        """`value` itself, or what it points to when it is a `$ref` object (one level)."""
        for _ in range(MAX_SCHEMA_DEPTH):
            if not (isinstance(value, dict) and isinstance(value.get("$ref"), str)):
                return value
            try:
                value = self._resolver.lookup(value["$ref"]).contents
            except Unresolvable:
                return {}
        return {}

    def inline(self, value: Any, depth: int = 0, chain: tuple[str, ...] = ()) -> Any:
        self._nodes += 1
        if depth > MAX_SCHEMA_DEPTH or self._nodes > MAX_SCHEMA_NODES:
            return {}
        if isinstance(value, dict):
            ref = value.get("$ref")
            if isinstance(ref, str):
                if ref in chain:
                    return {}
                return self.inline(self.resolve({"$ref": ref}), depth + 1, (*chain, ref))
            return {
                key: self.inline(item, depth + 1, chain)
                for key, item in value.items()
                if key not in {"xml", "externalDocs", "example", "examples"}
            }
        if isinstance(value, list):
            return [self.inline(item, depth + 1, chain) for item in value]
        return value


def base_url(document: Mapping[str, Any], url: str) -> str:
    """The API's base: the first server's URL (its variables at their defaults) resolved
    against the document's URL, else the document URL's origin."""
    servers = document.get("servers")
    if isinstance(servers, list) and servers and isinstance(servers[0], dict):
        server = servers[0]
        address = str(server.get("url") or "/")
        for name, variable in (server.get("variables") or {}).items():
            if isinstance(variable, dict):
                address = address.replace("{" + str(name) + "}", str(variable.get("default", "")))
        return urljoin(url, address)
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/"


def operations(document: dict[str, Any], url: str) -> list[Operation]:
    """Every operation with an `operationId`, in the document's order (at most
    `MAX_TOOLS_PER_SERVER`)."""
    inliner = _Inliner(document, url)
    base = base_url(document, url)
    found: list[Operation] = []
    for path, listed in (document.get("paths") or {}).items():
        item = inliner.resolve(listed)
        if not isinstance(item, dict):
            continue
        shared = item.get("parameters") or []
        for method in METHODS:
            operation = item.get(method)
            if not isinstance(operation, dict) or not operation.get("operationId"):
                continue
            found.append(_operation(inliner, base, str(path), method, operation, shared))
            if len(found) >= MAX_TOOLS_PER_SERVER:
                return found
    return found


def _operation(
    inliner: _Inliner,
    base: str,
    path: str,
    method: str,
    operation: dict[str, Any],
    shared: list[Any],
) -> Operation:
    parameters: dict[tuple[str, str], Parameter] = {}
    for raw in [*shared, *(operation.get("parameters") or [])]:
        parameter = inliner.resolve(raw)
        if not isinstance(parameter, dict):
            continue
        name, location = str(parameter.get("name", "")), parameter.get("in")
        if location not in {"path", "query", "header"} or not name:
            continue
        if location == "header" and name.lower() in _IGNORED_HEADERS:
            continue
        schema = parameter.get("schema")
        if schema is None:  # a `content` parameter: its one media type's schema
            media: Any = next(iter((parameter.get("content") or {}).values()), {})
            schema = media.get("schema", {}) if isinstance(media, dict) else {}
        schema = inliner.inline(schema)
        if parameter.get("description") and isinstance(schema, dict):
            schema = {**schema, "description": str(parameter["description"])}
        parameters[(name, location)] = Parameter(
            name=name,
            location=location,
            required=location == "path" or bool(parameter.get("required")),
            schema=schema if isinstance(schema, dict) else {},
        )
    body_schema, body_required = None, False
    body = inliner.resolve(operation.get("requestBody"))
    if isinstance(body, dict):
        for media_type, media in (body.get("content") or {}).items():
            if _is_json(str(media_type)) and isinstance(media, dict):
                schema = inliner.inline(media.get("schema", {}))
                body_schema = schema if isinstance(schema, dict) else {}
                body_required = bool(body.get("required"))
                break
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in parameters.values():
        if parameter.name in properties:
            continue
        properties[parameter.name] = parameter.schema
        if parameter.required:
            required.append(parameter.name)
    if body_schema is not None:
        properties["body"] = body_schema
        if body_required:
            required.append("body")
    input_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    summary, details = operation.get("summary"), operation.get("description")
    description = "\n\n".join(str(text) for text in (summary, details) if text)
    return Operation(
        method=method.upper(),
        path=path,
        base_url=base,
        parameters=tuple(parameters.values()),
        body_schema=body_schema,
        body_required=body_required,
        tool=ToolDefinition(
            name=str(operation["operationId"]),
            description=description,
            input_schema=input_schema,
        ),
    )


def _is_json(media_type: str) -> bool:
    essence = media_type.split(";", 1)[0].strip().lower()
    return essence == "application/json" or essence.endswith("+json")


@dataclass(frozen=True, slots=True)
class Request:
    """What to send for one call."""

    method: str
    url: str
    params: list[tuple[str, str | int | float | bool | None]]
    headers: dict[str, str]
    json_body: Any
    has_body: bool


class BadArguments(ValueError):
    """The model's arguments do not fit the operation (told to the model, as a tool error)."""


def build_request(operation: Operation, arguments: Mapping[str, Any]) -> Request:
    """The request `operation` takes for `arguments`: path parameters URL-quoted into the
    path, the query and header parameters, and `body` as the JSON body."""
    path = operation.path
    params: list[tuple[str, str | int | float | bool | None]] = []
    headers: dict[str, str] = {}
    for parameter in operation.parameters:
        value = arguments.get(parameter.name)
        if value is None:
            if parameter.required:
                raise BadArguments(f"{parameter.name} is required")
            continue
        if parameter.location == "path":
            segment = _text(value)
            if segment in ("", ".", ".."):
                # A dot segment would move the request up the API's paths, to operations the
                # agent was not given (slashes are quoted; these are resolved by the client).
                raise BadArguments(f"{parameter.name} cannot be {segment!r}")
            path = path.replace("{" + parameter.name + "}", quote(segment, safe=""))
        elif parameter.location == "query":
            values = value if isinstance(value, list) else [value]
            params.extend((parameter.name, _text(item)) for item in values)
        else:
            headers[parameter.name] = _text(value)
    has_body = operation.body_schema is not None and "body" in arguments
    if operation.body_required and not has_body:
        raise BadArguments("body is required")
    url = operation.base_url.rstrip("/") + "/" + path.lstrip("/")
    return Request(
        method=operation.method,
        url=url,
        params=params,
        headers=headers,
        json_body=arguments.get("body") if has_body else None,
        has_body=has_body,
    )


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def response_output(status: int, content_type: str, body: bytes) -> ToolOutput:
    """What the model sees of the API's response: JSON as text and structured, other text as
    text, an image as a data URL; a status of 300 or more marks an error."""
    essence = content_type.split(";", 1)[0].strip().lower()
    if status >= 300:
        text = body[:ERROR_PREVIEW].decode("utf-8", errors="replace")
        note = " (redirects are not followed)" if status < 400 else ""
        return ToolOutput(
            content=[{"type": "text", "text": f"HTTP {status}{note}: {text}"}], is_error=True
        )
    if essence.startswith("image/"):
        data = base64.b64encode(body).decode("ascii")
        return ToolOutput(
            content=[
                {"type": "image", "mediaType": essence, "url": f"data:{essence};base64,{data}"}
            ]
        )
    if _is_json(essence) or not essence:
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        else:
            text = json.dumps(parsed, ensure_ascii=False)
            return ToolOutput(content=[{"type": "text", "text": text}], structured=parsed)
    if essence.startswith("text/") or _is_json(essence) or not essence or "xml" in essence:
        return ToolOutput(
            content=[{"type": "text", "text": body.decode("utf-8", errors="replace")}]
        )
    return ToolOutput(
        content=[{"type": "text", "text": f"[{essence} response, {len(body)} bytes]"}]
    )
