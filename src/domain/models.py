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
    if not model or len(model) > 200 or has_invisible(model, spaces=True) or not is_storable(model):
        raise Invalid(f"{field} names no valid model", [field_error(field, "invalid model name")])
    return ModelRef(provider, model)


def resolve_embedding_model(model: object, dimensions: object) -> tuple[str, int]:
    """Validate an embedding model and its dimension count; fill in the count when it is known.

    A local model must be one we ship. A known model given with another dimension count is a
    mismatch (400). An unknown OpenAI-compatible model needs its dimension count.
    """
    ref = parse_model_ref(model, field="embeddingModel", providers=EMBEDDING_PROVIDERS)
    name = str(ref)
    known = KNOWN_EMBEDDING_DIMENSIONS.get(name)
    if ref.provider == "local" and known is None:
        locals_ = sorted(k for k in KNOWN_EMBEDDING_DIMENSIONS if k.startswith("local:"))
        raise Invalid(
            f"Unknown local embedding model '{ref.model}'; available: {', '.join(locals_)}",
            [field_error("embeddingModel", "unknown local model")],
        )
    if dimensions is None:
        if known is None:
            raise Invalid(
                "embeddingDimensions is required for this embedding model",
                [field_error("embeddingDimensions", "required for an unlisted model")],
            )
        return name, known
    if isinstance(dimensions, bool) or not isinstance(dimensions, int):
        raise Invalid(
            "embeddingDimensions must be an integer",
            [field_error("embeddingDimensions", "expected an integer")],
        )
    if not 1 <= dimensions <= MAX_EMBEDDING_DIMENSIONS:
        raise Invalid(
            f"embeddingDimensions must be between 1 and {MAX_EMBEDDING_DIMENSIONS}",
            [field_error("embeddingDimensions", "out of range")],
        )
    if known is not None and dimensions != known:
        raise Invalid(
            f"{name} produces {known}-dimensional embeddings, not {dimensions}",
            [field_error("embeddingDimensions", f"must be {known} for {name}")],
        )
    return name, dimensions
