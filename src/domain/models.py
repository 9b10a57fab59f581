"""Model identifiers of the form `provider:model`, and the embedding models we know."""

from __future__ import annotations

from dataclasses import dataclass

from domain.errors import Invalid, field_error
from domain.text import has_invisible, is_storable

EMBEDDING_PROVIDERS = ("local", "openai")
CHAT_PROVIDERS = ("local", "openai")
LOCAL_CHAT_MODELS = ("smollm2-135m",)
DEFAULT_EMBEDDING_MODEL = "local:all-MiniLM-L6-v2"
MAX_EMBEDDING_DIMENSIONS = 4000
MAX_MODEL_NAME = 200
"""The longest model name after `provider:`."""

# Dimensions of embedding models whose size is fixed; other `openai:` models need them given.
KNOWN_EMBEDDING_DIMENSIONS: dict[str, int] = {
    "local:all-MiniLM-L6-v2": 384,
    "openai:text-embedding-3-small": 1536,
    "openai:text-embedding-3-large": 3072,
    "openai:text-embedding-ada-002": 1536,
}


@dataclass(frozen=True, slots=True)
class ModelRef:
    """A `provider:model` reference."""

    provider: str
    model: str

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}"


def parse_model_ref(value: object, *, field: str, providers: tuple[str, ...]) -> ModelRef:
    """Parse `provider:model`, refusing an unknown provider with a message naming the known ones."""
    if not isinstance(value, str) or ":" not in value:
        raise Invalid(
            f"{field} must have the form provider:model",
            [field_error(field, "expected a string such as local:all-MiniLM-L6-v2")],
        )
    provider, _, model = value.strip().partition(":")
    if provider not in providers:
        known = ", ".join(providers)
        raise Invalid(
            f"Unknown provider '{provider}' in {field}; known providers: {known}",
            [field_error(field, f"unknown provider '{provider}'")],
        )
    if (
        not model
        or len(model) > MAX_MODEL_NAME
        or has_invisible(model, spaces=True)
        or not is_storable(model)
    ):
        raise Invalid(f"{field} names no valid model", [field_error(field, "invalid model name")])
    return ModelRef(provider, model)


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


def parse_embedding_model(value: object) -> str:
    """An embedding model: `local:<a model we ship>` or `openai:<any model>`."""
    ref = parse_model_ref(value, field="embeddingModel", providers=EMBEDDING_PROVIDERS)
    name = str(ref)
    if ref.provider == "local" and name not in KNOWN_EMBEDDING_DIMENSIONS:
        locals_ = sorted(k for k in KNOWN_EMBEDDING_DIMENSIONS if k.startswith("local:"))
        raise Invalid(
            f"Unknown local embedding model '{ref.model}'; available: {', '.join(locals_)}",
            [field_error("embeddingModel", "unknown local model")],
        )
    return name


DIMENSIONS_INVALID = f"embeddingDimensions must be between 1 and {MAX_EMBEDDING_DIMENSIONS}"


def parse_dimensions(value: object) -> int | None:
    """A dimension count from 1 to 4000, or None when absent (the model's own)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(
            "embeddingDimensions must be an integer",
            [field_error("embeddingDimensions", "expected an integer")],
        )
    if not 1 <= value <= MAX_EMBEDDING_DIMENSIONS:
        raise Invalid(DIMENSIONS_INVALID, [field_error("embeddingDimensions", "out of range")])
    return value


def embedding_dimensions(model: str, dimensions: int | None) -> int:
    """The dimension count of `model` (a parsed embedding model): its known count, which a given
    one must equal (400 on a mismatch), or the given one for a model we do not list (400 when
    none is given)."""
    known = KNOWN_EMBEDDING_DIMENSIONS.get(model)
    if dimensions is None:
        if known is None:
            raise Invalid(
                "embeddingDimensions is required for this embedding model",
                [field_error("embeddingDimensions", "required for an unlisted model")],
            )
        return known
    if known is not None and dimensions != known:
        raise Invalid(
            f"{model} produces {known}-dimensional embeddings, not {dimensions}",
            [field_error("embeddingDimensions", f"must be {known} for {model}")],
        )
    return dimensions
