"""Agents and their tags: the fields, the rules for creating and changing them, who may."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from domain.errors import Forbidden, Invalid, field_error
from domain.identity import AGENTS_MANAGE, Caller
from domain.ids import parse_positive_id
from domain.models import CHAT_PROVIDERS, LOCAL_CHAT_MODELS, parse_model_ref
from domain.text import check_single_line, check_storable

AGENT_NOT_FOUND = "Agent not found"
AGENT_ID_REQUIRED = "Valid agent ID is required"
TAG_NOT_FOUND = "Tag not found"
TAG_ID_REQUIRED = "Valid tag ID is required"
CANNOT_MANAGE_AGENTS = "Agent management permission required"
DEFAULT_CHAT_MODEL = "local:smollm2-135m"
MAX_AGENT_NAME = 200
MAX_AGENT_DESCRIPTION = 4000
MAX_AGENT_ROLE = 20_000
MAX_LINKED_IDS = 50
MAX_TAG_NAME = 64
TAG_COLOR = re.compile(r"^#[0-9a-fA-F]{6}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentTag:
    """A label an organization puts on its agents."""

    id: int
    org_id: str
    name: str
    color: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Agent:
    """An assistant of one organization: its instructions (`role`), the chat model it runs on,
    the knowledge bases it searches and the skills it may load."""

    id: int
    org_id: str
    user_id: str
    name: str
    description: str
    role: str
    model: str
    knowledge_base_ids: list[int]
    skill_ids: list[int]
    tags: list[AgentTag]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class NewAgent:
    """The validated fields of an agent about to be created."""

    org_id: str
    user_id: str
    name: str
    description: str
    role: str
    model: str
    knowledge_base_ids: list[int] = field(default_factory=list)
    skill_ids: list[int] = field(default_factory=list)
    tag_ids: list[int] = field(default_factory=list)


def require_agent_manager(caller: Caller) -> None:
    """Managing agents needs `org:admin` or the `org:agents:manage` permission."""
    if not caller.has_permission(AGENTS_MANAGE):
        raise Forbidden(CANNOT_MANAGE_AGENTS)


def validate_agent_name(value: object) -> str:
    """A name is a non-empty string of at most 200 characters after trimming, on one line,
    without control characters (the title rule, `domain.text.check_single_line`)."""
    if not isinstance(value, str) or not value.strip():
        raise Invalid("Name is required", [field_error("name", "must be a non-empty string")])
    name = value.strip()
    if len(name) > MAX_AGENT_NAME:
        raise Invalid(
            f"Name must be at most {MAX_AGENT_NAME} characters", [field_error("name", "too long")]
        )
    return check_single_line(name, "name")


def validate_text(value: object, *, field: str, limit: int) -> str:
    """An optional free text of at most `limit` characters, without NUL; absent means empty."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Invalid(f"{field} must be a string", [field_error(field, "expected a string")])
    if len(value) > limit:
        raise Invalid(
            f"{field} must be at most {limit} characters", [field_error(field, "too long")]
        )
    return check_storable(value, field).strip()


def validate_chat_model(value: object, *, field: str = "model") -> str:
    """A chat model is `local:<bundled model>` or `openai:<any model>`."""
    ref = parse_model_ref(value, field=field, providers=CHAT_PROVIDERS)
    if ref.provider == "local" and ref.model not in LOCAL_CHAT_MODELS:
        raise Invalid(
            f"Unknown local chat model '{ref.model}'; available: "
            + ", ".join(f"local:{m}" for m in LOCAL_CHAT_MODELS),
            [field_error(field, "unknown local model")],
        )
    return str(ref)


def validate_id_list(value: object, *, field: str) -> list[int]:
    """A list of at most 50 positive integer ids; duplicates are dropped, order is kept."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise Invalid(f"{field} must be a list of ids", [field_error(field, "expected a list")])
    if len(value) > MAX_LINKED_IDS:
        raise Invalid(
            f"{field} may hold at most {MAX_LINKED_IDS} ids", [field_error(field, "too many")]
        )
    message = f"{field} must hold positive integer ids"
    ids: list[int] = []
    for item in value:
        try:
            ids.append(parse_positive_id(item, message))
        except Invalid:
            raise Invalid(message, [field_error(field, f"invalid id {item!r}")]) from None
    return list(dict.fromkeys(ids))


def validate_tag_name(value: object) -> str:
    """A tag name is a non-empty string of at most 64 characters after trimming, on one line,
    without control characters (the title rule)."""
    if not isinstance(value, str) or not value.strip():
        raise Invalid("Name is required", [field_error("name", "must be a non-empty string")])
    name = value.strip()
    if len(name) > MAX_TAG_NAME:
        raise Invalid(
            f"Name must be at most {MAX_TAG_NAME} characters", [field_error("name", "too long")]
        )
    return check_single_line(name, "name")


def validate_tag_color(value: object) -> str | None:
    """A tag colour is absent or `#RRGGBB`; stored in lower case."""
    if value is None:
        return None
    if not isinstance(value, str) or not TAG_COLOR.match(value):
        raise Invalid(
            "color must have the form #RRGGBB", [field_error("color", "expected #RRGGBB")]
        )
    return value.lower()
