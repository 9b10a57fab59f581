"""What every feature's request and response bodies share: the camelCase base struct, the
error and success bodies, the constrained types and patterns the OpenAPI document states, and
the one step from a request struct to a use case's command (`command`). Each feature's bodies
live in its own `<feature>_schemas` module, with the rules that give their fields' messages."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache
from operator import attrgetter
from typing import Annotated, Any, ClassVar, Self, TypeVar

from msgspec import UNSET, Meta, Struct

from domain.files import CONTENT_TYPE_ESSENCE, MAX_CONTENT_TYPE
from domain.ids import MAX_BIGINT, UUID_PATTERN
from domain.models import CHAT_PROVIDERS, MAX_MODEL_NAME
from domain.text import INVISIBLE, SPACES, character_class
from domain.values import UNSET as DOMAIN_UNSET
from entrypoints.http.rules import Rule

PositiveId = Annotated[int, Meta(ge=1, le=MAX_BIGINT, description="A positive 64-bit integer id")]
Uuid = Annotated[str, Meta(pattern=UUID_PATTERN, extra_json_schema={"extra": {"format": "uuid"}})]
"""A uuid in the canonical 8-4-4-4-12 form (answered in lower case). Not `uuid.UUID`: msgspec
decodes that from forms the contract refuses (no dashes)."""

# Patterns the document states and the use cases enforce with their own messages (the decoder
# enforces only the simpler `pattern=r"\S"`, so that those messages stay the use cases'):
# a name or title is one line without control or bidirectional-control characters, and no
# stored text holds NUL.
_CONTROLS = r"\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069"
ONE_LINE = rf"^[^{_CONTROLS}]*[^\s{_CONTROLS}][^{_CONTROLS}]*$"
NO_NUL = r"^[^\u0000]*$"
NO_CONTROLS = rf"^[^{_CONTROLS}]*$"
# Python's `str.strip()` also drops U+001C to U+001F and U+0085, which `\s` leaves.
NOT_BLANK = r"^[^\u0000]*[^\s\u0000\u001c-\u001f\u0085][^\u0000]*$"
MIME_TYPE = rf"^{CONTENT_TYPE_ESSENCE}( *;[\u0020-\u007e]*)?$"


def documented(pattern: str, **more: object) -> dict[str, object]:
    """`extra_json_schema` that states `pattern` (and `more`) in the document only."""
    return {"extra": {"pattern": pattern, **more}}


def model_pattern(providers: tuple[str, ...]) -> str:
    """A `provider:model` string of one of `providers` (the use case checks the model)."""
    refused = character_class(INVISIBLE, SPACES)
    return rf"^({'|'.join(providers)}):[^{refused}]{{1,{MAX_MODEL_NAME}}}$"


def line(limit: int, **more: Any) -> Meta:
    """A name or title of at most `limit` characters: not blank, one line (`domain.text.
    parse_line` holds the rest of its rules)."""
    return Meta(
        min_length=1,
        max_length=limit,
        pattern=r"\S",
        extra_json_schema=documented(ONE_LINE),
        **more,
    )


def text(limit: int, **more: Any) -> Meta:
    """A free text of at most `limit` characters without NUL (`domain.text.parse_text`)."""
    return Meta(max_length=limit, extra_json_schema=documented(NO_NUL), **more)


ChatModel = Annotated[
    str,
    Meta(
        description="provider:model, e.g. local:smollm2-135m or openai:gpt-4o-mini",
        extra_json_schema=documented(model_pattern(CHAT_PROVIDERS)),
    ),
]
MimeType = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=MAX_CONTENT_TYPE,
        pattern=r"\S",
        extra_json_schema=documented(MIME_TYPE, examples=["text/markdown"]),
    ),
]
Text = Annotated[str, Meta(min_length=1, pattern=r"\S", extra_json_schema=documented(NOT_BLANK))]
"""A string with at least one non-blank character."""

# Litestar documents a list of constrained integers with plain integer items: say it again.
ID_ITEMS = {"extra": {"items": {"type": "integer", "minimum": 1, "maximum": MAX_BIGINT}}}

C = TypeVar("C")


class Camel(Struct, rename="camel", forbid_unknown_fields=False):
    """A body or response, camelCase on the wire. A request body's `rules` give the messages of
    its fields' decoding failures, the first that applies winning; a body whose rules the domain
    states whole has a static `check(body: bytes)` instead (`validation`). A response is built
    `from_entity`, the domain's value it shows."""

    rules: ClassVar[tuple[Rule, ...]] = ()

    @classmethod
    def from_entity(cls, entity: object, **given: Any) -> Self:
        """The struct with `entity`'s attributes of its fields' names, `given` in place of some.
        Nothing is converted again: the domain's values are typed already (an enum is written as
        its value)."""
        if given:
            names = (name for name in cls.__struct_fields__ if name not in given)
            return cls(**{name: getattr(entity, name) for name in names}, **given)
        return cls(*_attributes(cls)(entity))

    @classmethod
    def from_entities(cls, entities: Iterable[object]) -> list[Self]:
        """`from_entity` of each, for a listing."""
        values = _attributes(cls)
        return [cls(*values(entity)) for entity in entities]


@cache
def _attributes(struct: type[Struct]) -> Callable[[object], tuple[Any, ...]]:
    names = struct.__struct_fields__
    if len(names) == 1:
        (name,) = names
        return lambda entity: (getattr(entity, name),)
    return attrgetter(*names)


class Closed(Camel, forbid_unknown_fields=True):
    """A body part whose unknown keys are refused; documented with `additionalProperties:
    false` (`openapi.complete_document`)."""


class ErrorBody(Camel, omit_defaults=True):
    error: str
    details: list[dict[str, Any]] = []


class SuccessMessage(Camel):
    success: bool
    message: str


def fields_of(data: Struct) -> dict[str, Any]:
    """A request struct's fields by their Python names, msgspec's UNSET as the domain's (a field
    the caller did not send)."""
    return {
        name: DOMAIN_UNSET if (value := getattr(data, name)) is UNSET else value
        for name in data.__struct_fields__
    }


def command(parse: Callable[..., C], data: Struct, **context: Any) -> C:
    """The command `parse` (a command's `parse`) builds from the request struct `data` and
    `context` (the caller): one step from the wire to the domain's parsed values."""
    return parse(**context, **fields_of(data))
