"""A client generated from the OpenAPI document by a maintained generator
(openapi-python-client, offline from the document file) works against `agent-platform serve`."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx

from tests.e2e.serving import Server

GENERATOR = Path(sys.executable).parent / "openapi-python-client"


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def generate(document: dict, where: Path) -> str:
    """Generate the client package under `where`; its import name."""
    source = where / "openapi.json"
    source.write_text(json.dumps(document))
    (where / "config.yml").write_text("package_name_override: agent_platform_client\n")
    result = subprocess.run(
        [
            GENERATOR,
            "generate",
            "--path",
            str(source),
            "--config",
            str(where / "config.yml"),
            "--meta",
            "none",
            "--output-path",
            str(where / "agent_platform_client"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        # It formats what it generates with ruff, from the same environment.
        env={**os.environ, "PATH": f"{GENERATOR.parent}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Warning" not in result.stdout + result.stderr, result.stdout + result.stderr
    return "agent_platform_client"


def test_a_generated_client_lists_knowledge_bases(tmp_path):
    server = Server(tmp_path / "server")
    server.start(timeout=90)
    try:
        document = httpx.get(f"{server.base}/schema/openapi.json").json()
        # The webhooks are called by the identity and e-mail providers, not by API clients
        # (and a raw `message/rfc822` body is no type a client generator knows).
        document["paths"] = {
            path: item
            for path, item in document["paths"].items()
            if not path.startswith("/webhooks/")
        }
        package = generate(document, tmp_path)
        headers = server.headers(org="org_client")
        created = httpx.post(f"{server.base}/kb/manage", json={"name": "Typed"}, headers=headers)
        assert created.status_code == 201, created.text

        sys.path.insert(0, str(tmp_path))
        try:
            client_module = importlib.import_module(package)
            operation = document["paths"]["/kb/manage"]["get"]["operationId"]
            tag = snake(document["paths"]["/kb/manage"]["get"]["tags"][0].replace(" ", ""))
            listing = importlib.import_module(f"{package}.api.{tag}.{snake(operation)}")
            token = headers["Authorization"].removeprefix("Bearer ")
            client = client_module.AuthenticatedClient(base_url=server.base, token=token)
            with client as session:
                answer = listing.sync_detailed(client=session)
                anonymous = listing.sync_detailed(client=client_module.Client(base_url=server.base))
        finally:
            sys.path.remove(str(tmp_path))
            for name in [m for m in sys.modules if m.split(".")[0] == package]:
                del sys.modules[name]
        assert answer.status_code == 200
        parsed = answer.parsed
        assert parsed.success is True
        assert [kb.name for kb in parsed.knowledge_bases] == ["Typed"]
        assert parsed.knowledge_bases[0].embedding_dimensions == 384
        assert anonymous.status_code == 401 and anonymous.parsed.error == "Unauthorized"
    finally:
        server.stop()
