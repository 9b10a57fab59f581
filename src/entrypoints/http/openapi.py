"""OpenAPI helpers: the error responses each route documents, and what Litestar cannot infer."""

from __future__ import annotations

from typing import Any

from litestar._openapi.plugin import OpenAPIPlugin
from litestar.enums import ParamType
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import (
    OpenAPI,
    OpenAPIFormat,
    OpenAPIHeader,
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Operation,
    RequestBody,
    Schema,
)
from litestar.openapi.spec import Parameter as OpenAPIParameter

from domain.ids import MAX_BIGINT
from entrypoints.http.schemas import Closed, ErrorBody

_DESCRIPTIONS = {
    400: "Invalid request (the message is the specification's, `details` names the fields)",
    401: "Missing or invalid bearer token",
    402: "A spend cap of the organization is reached: `details` has each period reached "
    "(`period`, `cap`, `spent` with what calls under way reserved, `resetsAt`), and "
    "`Retry-After` the seconds until the latest of those resets",
    403: "The token's user lacks the role or belongs to no organization",
    404: "Not found in the caller's organization",
    405: "Only the documented method is allowed (see `Allow`)",
    409: "Conflicts with the current state",
    413: "Too large",
    415: "The body was not sent as `application/json`",
    500: "Unexpected failure",
    503: "The embedding model cannot be reached or is not configured",
}


def errors(*statuses: int, public: bool = False) -> dict[int, ResponseSpec]:
    """Document `{"error", "details"}` bodies for the given statuses, plus 401 (unless the route
    is `public`) and 500."""
    codes = sorted({*statuses, 500} | (set() if public else {401}))
    return {
        code: ResponseSpec(
            data_container=ErrorBody, description=_DESCRIPTIONS[code], generate_examples=False
        )
        for code in codes
    }


def body_errors(*statuses: int) -> dict[int, ResponseSpec]:
    """`errors` of a route that takes a JSON body: 400 and 415 too."""
    return errors(400, 415, *statuses)


def _event_stream(description: str) -> OpenAPIResponse:
    return OpenAPIResponse(
        description=description,
        content={
            "text/event-stream": OpenAPIMediaType(
                schema=Schema(
                    type=OpenAPIType.STRING,
                    description="`data: <chunk JSON>` events, then `data: [DONE]`",
                )
            )
        },
        headers={
            "X-Thread-ID": OpenAPIHeader(
                schema=Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.UUID),
                description="The conversation's id",
            ),
            "x-vercel-ai-ui-message-stream": OpenAPIHeader(
                schema=Schema(type=OpenAPIType.STRING, const="v1")
            ),
        },
    )


_SIGNED_QUERY = (
    ("ct", "The content type the address was signed for; sent again as `Content-Type`"),
    ("size", "The size in bytes the address accepts, exactly"),
    ("exp", "When the address expires (Unix seconds)"),
    ("sig", "The signature over the key, content type, size and expiry"),
)


PUBLIC_OPERATIONS = (
    ("/health", "get"),
    ("/.well-known/jwks.json", "get"),
    ("/webhooks/identity", "post"),
    ("/webhooks/inbound-email", "post"),
)


def complete_document(plugin: OpenAPIPlugin) -> None:
    """What Litestar cannot infer from the handlers: the chat stream's media type, the signed
    upload's query parameters and raw body, `security: []` on the public operations (Litestar
    drops an empty list), 64-bit bounds as exact integers (Litestar writes them as floats) and
    closed objects."""
    _complete_operations(plugin.provide_openapi())
    document = plugin.provide_openapi_schema()
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            if (path, method) in PUBLIC_OPERATIONS or path.startswith("/storage/"):
                operation["security"] = []
            for parameter in operation.get("parameters", []):
                parameter["schema"] = _not_null(parameter.get("schema", {}))
            _json_body_errors(operation)
    _exact_bounds(document)
    _close(document)


def _close(document: dict[str, Any]) -> None:
    """`additionalProperties: false` on the schema of every `Closed` struct: msgspec refuses
    their unknown keys, and Litestar does not say so."""
    pending, names = [Closed], set()
    while pending:
        for struct in pending.pop().__subclasses__():
            names.add(struct.__name__)
            pending.append(struct)
    for schema in document.get("components", {}).get("schemas", {}).values():
        if schema.get("title") in names:
            schema["additionalProperties"] = False


def _json_body_errors(operation: dict[str, Any]) -> None:
    """Every route with a JSON body answers 400 and 415 (see `validation.check_request`), and
    413 to a body over its size limit."""
    if "application/json" not in operation.get("requestBody", {}).get("content", {}):
        return
    responses = operation.setdefault("responses", {})
    error = {
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    }
    for code in (400, 413, 415):
        responses.setdefault(str(code), {"description": _DESCRIPTIONS[code], **error})


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional query parameter is absent, never null: `oneOf [X, null]` becomes X."""
    kinds = schema.get("oneOf")
    if not isinstance(kinds, list):
        return schema
    kept = [kind for kind in kinds if kind != {"type": "null"}]
    if len(kept) != 1:
        return schema
    rest = {key: value for key, value in schema.items() if key != "oneOf"}
    return {**kept[0], **rest}


_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _exact_bounds(node: Any) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, float) and value == float(MAX_BIGINT):
                node[key] = MAX_BIGINT
            elif key in _BOUNDS and isinstance(value, float) and value.is_integer():
                node[key] = int(value)
            else:
                _exact_bounds(value)
    elif isinstance(node, list):
        for value in node:
            _exact_bounds(value)


_SIGNED_DOWNLOAD_QUERY = (
    ("exp", "When the address expires (Unix seconds)", True),
    ("sig", "The signature over the key and the other parameters", True),
    ("ct", "The content type the object is served with", False),
    ("fn", "The file name the object is downloaded as", False),
)


def _add_query(operation: Operation, names: tuple[tuple[str, str, bool], ...]) -> None:
    """Document the query parameters of a signed address (the handler reads them raw)."""
    known = {p.name for p in operation.parameters or [] if isinstance(p, OpenAPIParameter)}
    operation.parameters = [
        *(operation.parameters or []),
        *(
            OpenAPIParameter(
                name=name,
                param_in=ParamType.QUERY,
                required=required,
                description=description,
                schema=Schema(type=OpenAPIType.STRING),
            )
            for name, description, required in names
            if name not in known
        ),
    ]


def _complete_operations(openapi: OpenAPI) -> None:
    paths = openapi.paths or {}
    chat = paths.get("/chat")
    if chat is not None and chat.post is not None and chat.post.responses is not None:
        chat.post.responses["200"] = _event_stream(
            "The answer, streamed in the AI SDK UI message stream protocol v1"
        )
    resume = paths.get("/chat/{thread_id}/stream")
    if resume is not None and resume.get is not None and resume.get.responses is not None:
        resume.get.responses["200"] = _event_stream("The running answer's stream, from its start")
        resume.get.responses["204"] = OpenAPIResponse(description="No answer is running")
    _complete_skill_operations(paths)
    storage = next((item for path, item in paths.items() if path.startswith("/storage/")), None)
    if storage is not None and storage.get is not None:
        _add_query(storage.get, _SIGNED_DOWNLOAD_QUERY)
    if storage is not None and storage.put is not None:
        put = storage.put
        _add_query(put, tuple((name, text, True) for name, text in _SIGNED_QUERY))
        put.request_body = RequestBody(
            content={
                "application/octet-stream": OpenAPIMediaType(
                    schema=Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.BINARY)
                )
            },
            description="The file's bytes, sent with the `Content-Type` the address was signed "
            "for (`ct`); any other is refused with 403",
            required=True,
        )


def _binary(media_type: str, min_length: int | None = None) -> dict[str, OpenAPIMediaType]:
    return {
        media_type: OpenAPIMediaType(
            schema=Schema(
                type=OpenAPIType.STRING, format=OpenAPIFormat.BINARY, min_length=min_length
            )
        )
    }


def _complete_skill_operations(paths: dict[str, Any]) -> None:
    """The zip body of `POST /skills/import` (read raw by its handler) and the bytes of `GET
    /skills/files`, served with the file's own content type."""
    archive = paths.get("/skills/import")
    if archive is not None and archive.post is not None:
        archive.post.request_body = RequestBody(
            # `application/zip` is taken as well; the generators in use know only this one.
            content=_binary("application/octet-stream", min_length=1),
            description="The skill's folder as a zip archive, sent as `application/zip` or "
            "`application/octet-stream`",
            required=True,
        )
    files = paths.get("/skills/files")
    if files is not None and files.get is not None and files.get.responses is not None:
        files.get.responses["200"] = OpenAPIResponse(
            description="The file's bytes, sent with the content type recorded for the file "
            "(`contentType` in the skill's `files`)",
            content=_binary("application/octet-stream"),
        )
