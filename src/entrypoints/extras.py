"""Which optional parts of the install a configuration needs: `[local]` (the bundled models:
torch, sentence-transformers, llama-cpp-python and their weights) and `[embedded]` (the
embedded PostgreSQL). The base install serves with OpenAI-compatible models and an external
database; a configuration that needs more says so at start-up, naming the extra."""

from __future__ import annotations

from adapters.optional import (
    EMBEDDED_DATABASE_PACKAGES,
    EMBEDDED_EXTRA,
    LOCAL_CHAT_PACKAGES,
    LOCAL_EMBEDDING_PACKAGES,
    LOCAL_EXTRA,
    installed,
)
from entrypoints.config import Settings


def missing_extras(settings: Settings, *, models: bool = True) -> list[str]:
    """One line per setting whose value needs an extra that is not installed; the models are
    left out with `models=False` (a command that runs none, such as `migrate`)."""
    needs = (
        (
            models and settings.default_chat_model.startswith("local:"),
            f"AP_DEFAULT_CHAT_MODEL={settings.default_chat_model}",
            LOCAL_EXTRA,
            LOCAL_CHAT_PACKAGES,
        ),
        (
            models and settings.default_embedding_model.startswith("local:"),
            f"AP_DEFAULT_EMBEDDING_MODEL={settings.default_embedding_model}",
            LOCAL_EXTRA,
            LOCAL_EMBEDDING_PACKAGES,
        ),
        (
            not settings.database_url,
            "no AP_DATABASE_URL (the embedded PostgreSQL)",
            EMBEDDED_EXTRA,
            EMBEDDED_DATABASE_PACKAGES,
        ),
    )
    problems = []
    for needed, what, extra, modules in needs:
        absent = [m for m in modules if not installed(m)]
        if needed and absent:
            name = extra.partition("[")[2].rstrip("]")
            problems.append(
                f"{what} needs the [{name}] extra: pip install '{extra}' "
                f"(missing: {', '.join(absent)})"
            )
    return problems
