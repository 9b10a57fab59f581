"""The HTTP edge's own checks, the mechanism only: first the caller's right to the route (a
member of its organization, not removed since the token was issued, with the role the route
declares: `rules.access`), then every request is checked against the types its route declares
(and documents in `/schema/openapi.json`) before Litestar converts it, and a failure is answered
with the specification's message, which the declarations carry: a request struct's `rules`
(`schemas.Camel.rules`, one module per feature) and a parameter's `rule` (`rules.RuledQuery`,
`rules.RuledPath`).

Bodies are decoded strictly (no string-to-number coercion, and an integer is a JSON integer:
`2.0`, `2e0` and `"2"` are refused) with msgspec, one field at a time, so that every failing
field is known and the rules' order picks the message that wins when several fail (the handler
then parses the body into its command, as the CLI does, with the domain's own rules and
messages). Query and path parameters are checked from their raw strings. A body that is not
JSON, is nested too deeply or holds a number too large for any field is a 400, never a 500; a
body sent without a JSON media type is a 415.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, get_args, get_origin

import msgspec
from litestar import Request, Response
from litestar.datastructures import MultiDict
from litestar.enums import ParamType
from litestar.exceptions import HTTPException
from litestar.params import BodyKwarg, ParameterKwarg

from domain.errors import Invalid, field_error
from domain.identity import Caller, Identity
from domain.ids import NOT_A_JSON_INTEGER
from entrypoints.http.injection import CONTAINER_KEY, injected
from entrypoints.http.methods import OPTIONS, options_answer
from entrypoints.http.rules import (
    ACCESS,
    INVALID_BODY,
    MALFORMED_BODY,
    UNSUPPORTED_MEDIA_TYPE,
    Kind,
    ParamRule,
)
from entrypoints.wiring import OrgScopes

NOT_AN_INTEGER = NOT_A_JSON_INTEGER


def _classify(value: Any, error: str) -> Kind:
    if value is None:
        return "null"
    if isinstance(value, str) and not value.strip():
        return "empty"
    if re.match(r"Expected `[^`]+`, got `", error):
        return "type"
    return "range"


@dataclass(frozen=True, slots=True)
class _Field:
    wire: str
    type: Any
    required: bool


@cache
def _fields(struct: type[msgspec.Struct]) -> tuple[_Field, ...]:
    return tuple(_Field(f.encode_name, f.type, f.required) for f in msgspec.structs.fields(struct))


def decode_failures(struct: type[msgspec.Struct], body: bytes) -> dict[str, tuple[Kind, str]]:
    """Every field of `struct` that `body` fails, with the kind of failure and msgspec's text.
    Raises `Invalid(MALFORMED_BODY)` for a body that is not a JSON object."""
    try:
        # Most bodies are valid: one strict decode of the whole struct answers for every field.
        msgspec.json.decode(body, type=struct, strict=True)
        return {}
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        pass
    except UnicodeDecodeError:
        raise Invalid(MALFORMED_BODY, [field_error("body", "not valid UTF-8")]) from None
    try:
        raw = msgspec.json.decode(body, type=dict[str, msgspec.Raw])
    except RecursionError:
        raise Invalid(MALFORMED_BODY, [field_error("body", "nested too deeply")]) from None
    except msgspec.ValidationError:
        raise Invalid(INVALID_BODY, [field_error("body", "expected a JSON object")]) from None
    except msgspec.DecodeError as error:
        raise Invalid(MALFORMED_BODY, [field_error("body", _malformed(body, error))]) from None
    failures: dict[str, tuple[Kind, str]] = {}
    for field in _fields(struct):
        if field.wire not in raw:
            if field.required:
                failures[field.wire] = ("missing", "required")
            continue
        try:
            msgspec.json.decode(raw[field.wire], type=field.type, strict=True)
        except RecursionError:
            raise Invalid(MALFORMED_BODY, [field_error("body", "nested too deeply")]) from None
        except UnicodeDecodeError:
            raise Invalid(MALFORMED_BODY, [field_error("body", "not valid UTF-8")]) from None
        except msgspec.ValidationError as error:
            failures[field.wire] = _failure(raw[field.wire], field.type, error)
    return failures


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abAB]", re.ASCII)


def _malformed(body: bytes, error: msgspec.DecodeError) -> str:
    """msgspec's account of a malformed body, except its "Input data was truncated" for a high
    surrogate escape without its pair."""
    text = str(error)
    if "truncated" in text and _SURROGATE_ESCAPE.search(body):
        return "contains an unpaired surrogate escape"
    return text


def _failure(raw: bytes, kind: Any, error: msgspec.ValidationError) -> tuple[Kind, str]:
    """How a field failed. An integer the field would take, written as something else (`3.0`,
    `3e0`, `"3"`), is a type failure told as such (`NOT_AN_INTEGER`): the message alone ("Valid
    agent ID is required") would not say what is wrong with a 3."""
    try:
        value = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return ("range", str(error))
    if "got `float`" in str(error) or "got `str`" in str(error):
        try:
            msgspec.convert(_integral(value), kind, strict=True)
        except msgspec.ValidationError as again:
            error = again  # out of range, or not an integer at all: refused as such
        else:
            return ("type", NOT_AN_INTEGER)
    return (_classify(value, str(error)), str(error))


def _integral(value: Any) -> Any:
    """`value` with its integers in other clothes (integral floats, strings of digits) made
    integers: what a lax decoder would have taken."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19:
        return int(value)
    if isinstance(value, list):
        return [_integral(item) for item in value]
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    return value


def body_error(struct: type[msgspec.Struct], failures: dict[str, tuple[Kind, str]]) -> Invalid:
    """The error the struct's `rules` give for these failures: the first rule, in their order,
    whose field failed in a way it covers, with its `detail` (an integer in other clothes is
    always named, `NOT_AN_INTEGER`); without one, 400 "Invalid request body" naming every
    field."""
    for rule in getattr(struct, "rules", ()):
        failure = failures.get(rule.field)
        if failure is not None and failure[0] in rule.kinds:
            detail = NOT_AN_INTEGER if failure[1] == NOT_AN_INTEGER else rule.detail
            return Invalid(rule.message, [field_error(rule.field, detail)] if detail else None)
    return Invalid(INVALID_BODY, [field_error(f, text) for f, (_, text) in failures.items()])


def body_refusal(struct: type[msgspec.Struct], body: bytes) -> Invalid | None:
    """What the edge answers to `body` sent for `struct`: its domain `check` when it has one,
    else its `rules` (`body_error`); None for a valid body."""
    failures = decode_failures(struct, body)
    check = getattr(struct, "check", None)
    if check is not None:  # the domain's rules decide, naming every breach, nested ones too
        try:
            check(body)
        except Invalid as error:
            return error
        return None
    return body_error(struct, failures) if failures else None


def param_error(handler: Any, name: str, raw: str | None) -> Invalid | None:
    """The error the rule `handler` declares for its query or path parameter `name` (its wire
    name, or the camelCase of a snake_case path name) gives for `raw` (None: absent and
    required); None when it is valid or has no rule."""
    for wire, _source, _required, rule in _edge(handler).params:
        if name in (wire, _camel(wire)):
            return _param_error(name, raw, rule)
    return None


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _param_error(name: str, raw: str | None, rule: ParamRule | None) -> Invalid | None:
    if rule is None:
        return None
    if raw is None or not rule.valid(raw):
        return Invalid(rule.message, [field_error(name, rule.detail)] if rule.detail else None)
    return None


@dataclass(frozen=True, slots=True)
class _Edge:
    body: type[msgspec.Struct] | None
    # (wire name, "query" | "path", required, the rule its declaration carries)
    params: tuple[tuple[str, str, bool, ParamRule | None], ...]
    access: Callable[[Caller], None] | None
    # Whether the handler takes the `Caller` from the request's scope; one that does not (chat)
    # works in short scopes of its own, and the edge checks the caller in one too.
    caller_in_request: bool


def _struct_of(annotation: Any) -> type[msgspec.Struct] | None:
    while get_origin(annotation) is not None and get_args(annotation):
        annotation = get_args(annotation)[0]
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        return annotation
    return None


@cache
def _edge(handler: Any) -> _Edge:
    body: type[msgspec.Struct] | None = None
    params: list[tuple[str, str, bool, ParamRule | None]] = []
    path_names = _path_params(handler)
    for name, definition in handler.parsed_fn_signature.parameters.items():
        kwarg = definition.kwarg_definition
        rule = getattr(kwarg, "rule", None)
        if name == "data" or isinstance(kwarg, BodyKwarg):
            body = _struct_of(definition.annotation)
        elif name in path_names:
            params.append((name, "path", True, rule))
        elif isinstance(kwarg, ParameterKwarg) and kwarg.param_type is ParamType.QUERY:
            required = not definition.has_default and not definition.is_optional
            params.append((kwarg.name or name, "query", required, rule))
    caller_in_request = Caller in injected(handler.fn)
    return _Edge(body, tuple(params), handler.opt.get(ACCESS), caller_in_request)


def _path_params(handler: Any) -> set[str]:
    return {m for path in handler.paths for m in re.findall(r"{(\w+):", path)}


_CHARSET = re.compile(r";\s*charset\s*=\s*\"?([^\s;\"]+)", re.IGNORECASE)


def _is_json(content_type: str) -> bool:
    """JSON, in UTF-8 (the only encoding JSON may be exchanged in, RFC 8259): a charset
    parameter naming another encoding is refused rather than ignored."""
    media = content_type.split(";", 1)[0].strip().lower()
    if not (media == "application/json" or (media.startswith("application/") and "+json" in media)):
        return False
    charset = _CHARSET.search(content_type)
    return charset is None or charset.group(1).lower() in ("utf-8", "utf8")


def _header(request: Request[Any, Any, Any], name: bytes) -> str | None:
    """The first value of header `name` (lower case), read from the ASGI scope: Litestar's
    header object would parse every header of the request for it."""
    for key, value in request.scope["headers"]:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


async def check_request(request: Request[Any, Any, Any]) -> Response[None] | None:
    """Litestar `before_request` hook: refuse a caller who may not use the route at all
    (`_authorize`), then what the route's declared types refuse, with the messages of its
    declared rules, before Litestar converts anything. A query parameter given twice is refused:
    which of the two the handler would act on is nobody's guess. `OPTIONS` is answered here with
    the path's methods (see `methods`)."""
    if request.method == OPTIONS:
        return options_answer(request)
    edge = _edge(request.route_handler)
    await _authorize(request, edge)
    query: MultiDict[Any] | None = None
    for name, source, required, rule in edge.params:
        if source == "query":
            if query is None:  # Litestar builds a new MultiDict at every read: one per request
                query = request.query_params
            given = query.getall(name, ())
            if len(given) > 1:
                known = _param_error(name, None, rule)
                raise known or Invalid(f"{name} may be given once", [field_error(name, "repeated")])
            raw = given[0] if given else None
        else:
            raw = request.path_params.get(name)
        if raw is None and not required:
            continue
        error = _param_error(name, None if raw is None else str(raw), rule)
        if error is not None:
            raise error
    encoding = _header(request, b"content-encoding")
    if encoding is not None and encoding.strip().lower() != "identity":
        raise HTTPException(status_code=415, detail=UNSUPPORTED_MEDIA_TYPE)
    if edge.body is None:
        return None
    if not _is_json(_header(request, b"content-type") or ""):
        raise HTTPException(status_code=415, detail=UNSUPPORTED_MEDIA_TYPE)
    refusal = body_refusal(edge.body, await request.body())
    if refusal is not None:
        raise refusal
    return None


async def _authorize(request: Request[Any, Any, Any], edge: _Edge) -> None:
    """The caller's right to the route, before anything the request holds is read: on a route
    the bearer middleware authenticated, a token with an organization (403 "User is not part of
    any organization" otherwise), of a member not removed since it was issued (the `Caller`'s
    resolution refuses one, 403), holding the role the route declares (`rules.access`, 403)."""
    identity = request.scope.get("user")
    if not isinstance(identity, Identity):  # a public route: signed otherwise, or open
        return
    identity.as_caller()  # no organization: refused before a connection is taken
    container = request.scope["state"][CONTAINER_KEY]
    if edge.caller_in_request:  # resolved once: the handler is given this very caller
        caller = await container.get(Caller)
    else:
        async with (await container.get(OrgScopes)).acting_as(identity) as scope:
            caller = await scope.get(Caller)
    if edge.access is not None:
        edge.access(caller)
