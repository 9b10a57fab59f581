"""The deployment files (Dockerfile, compose.yaml, .dockerignore) against the code they deploy:
no docker here, so what can drift is checked by reading them. Every `AP_*` variable they name is
one the configuration reads, every configuration they give validates, every command they run is
one the CLI has."""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from entrypoints.cli import _parser
from entrypoints.config import Settings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
DOCKERFILE = (ROOT / "Dockerfile").read_text()
AP_NAME = re.compile(r"\bAP_[A-Z0-9_]+\b")
# `${NAME:-default}`, `${NAME-default}` and `${NAME}`, as compose interpolates them with NAME unset.
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")


def configuration_variables() -> set[str]:
    """The `AP_*` names `Settings.from_env` reads."""
    return set(re.findall(r'"(AP_[A-Z0-9_]+)"', (ROOT / "src/entrypoints/config.py").read_text()))


def app_services() -> dict[str, dict[str, Any]]:
    """The services that run the project's image."""
    return {
        name: service
        for name, service in COMPOSE["services"].items()
        if service.get("build") == "." or str(service.get("image", "")).startswith("agent-platform")
    }


def interpolated(value: object) -> str:
    """A compose value with its variables unset: their defaults, `$$` as `$`."""
    text = INTERPOLATION.sub(lambda m: m.group(2) or "", str(value))
    return text.replace("$$", "$")


def test_every_ap_variable_in_the_deployment_files_is_one_the_configuration_reads():
    known = configuration_variables()
    assert len(known) > 40
    # The image's build also sets the llama.cpp install script's own (its wheelhouse).
    build = set(AP_NAME.findall((ROOT / "scripts/install-llama-cpp.sh").read_text()))
    for path, allowed in (("compose.yaml", known), ("Dockerfile", known | build)):
        named = set(AP_NAME.findall((ROOT / path).read_text()))
        assert named, path
        assert named <= allowed, f"{path} names settings nothing reads: {named - allowed}"


@pytest.mark.parametrize("name", sorted(app_services()))
def test_each_service_of_the_image_has_a_valid_configuration(name):
    environment = {
        key: interpolated(value) for key, value in app_services()[name]["environment"].items()
    }
    image_env = dict(re.findall(r"^\s+(AP_[A-Z0-9_]+)=(\S+?)\s*\\?$", DOCKERFILE, re.M))
    settings = Settings.from_env({**image_env, **environment})
    assert settings.database_url and settings.database_migration_url
    assert settings.storage == "s3" and settings.s3_path_style
    # Servers leave the jobs to the worker services.
    assert settings.worker_in_process is False
    assert settings.host == "0.0.0.0"  # in a container, reached from outside it


@pytest.mark.parametrize("name", sorted(app_services()))
def test_each_service_of_the_image_runs_a_real_command(name):
    command = app_services()[name]["command"]
    assert isinstance(command, list)
    args = _parser().parse_args(command)  # argparse exits on an unknown command or option
    assert args.command in ("serve", "worker", "migrate", "token")


def test_the_topology_two_servers_workers_a_migration_before_them():
    services = COMPOSE["services"]
    assert services["api"]["deploy"]["replicas"] == 2
    assert services["api"]["command"] == ["serve"]
    assert services["worker"]["command"] == ["worker"]
    assert services["worker"]["deploy"]["replicas"] >= 1
    assert services["migrate"]["command"] == ["migrate"]
    for name in ("api", "worker"):
        assert services[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }
    assert services["postgres"]["image"].startswith("pgvector/pgvector:")
    assert services["minio"]["image"].startswith("minio/minio:RELEASE.")
    url = interpolated(services["api"]["environment"]["AP_DATABASE_URL"])
    assert url.startswith("postgresql://ap_app:")
    roles = COMPOSE["configs"]["postgres-roles"]["content"]
    assert "GRANT agent_platform_app TO ap_app" in roles
    assert "NOBYPASSRLS" in roles


def test_the_dockerfile_builds_the_cli_as_a_non_root_user():
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim$", DOCKERFILE, re.M)
    (entrypoint,) = re.findall(r"^ENTRYPOINT (.+)$", DOCKERFILE, re.M)
    assert json.loads(entrypoint) == ["agent-platform"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "agent-platform" in project["project"]["scripts"]
    users = re.findall(r"^USER (\S+)$", DOCKERFILE, re.M)
    assert users and users[-1] not in ("root", "0")
    (cmd,) = re.findall(r"^CMD (.+)$", DOCKERFILE, re.M)
    assert _parser().parse_args(json.loads(cmd)).command == "serve"


def test_the_dockerfile_pins_the_cpu_torch_that_pyproject_pins():
    # The Dockerfile reads the pin with this sed expression; it must find exactly pyproject's.
    assert "sed -n 's/.*\"torch==\\([0-9.]*\\)\".*/\\1/p' pyproject.toml" in DOCKERFILE
    assert '${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}' in DOCKERFILE
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    local = project["project"]["optional-dependencies"]["local"]
    pins = [p for p in local if p.startswith("torch")]
    assert len(pins) == 1 and re.fullmatch(r"torch==[0-9.]+", pins[0])
    makefile = (ROOT / "Makefile").read_text()
    assert pins[0] in makefile, "the Makefile and pyproject.toml pin different torch versions"


def test_what_the_dockerfile_copies_exists_and_is_not_ignored():
    allowed = [
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    copies = re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKERFILE, re.M)
    sources = [source for line in copies for source in shlex.split(line)]
    assert "src" in sources and "migrations" in sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert any(source == a or source.startswith(a + "/") for a in allowed), source


# ---- the web console: built in a Node stage, carried by the wheel


def test_the_dockerfile_builds_the_console_in_a_node_stage_before_the_install():
    assert re.search(r"^ARG NODE_IMAGE=node:22-slim$", DOCKERFILE, re.M)
    assert re.search(r"^FROM \$\{NODE_IMAGE\} AS console$", DOCKERFILE, re.M)
    node_stage = DOCKERFILE[DOCKERFILE.index("AS console") : DOCKERFILE.index("AS build")]
    assert "RUN npm ci" in node_stage and "npm run build" in node_stage
    copied = DOCKERFILE.index("COPY --from=console /console/dist console/dist")
    install = DOCKERFILE.index("/opt/venv/bin/pip install -c constraints.txt")
    assert DOCKERFILE.index("COPY hatch_build.py") < install and copied < install


def test_the_wheel_carries_the_built_console_and_the_sdist_its_sources():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wheel = project["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["hooks"]["custom"]["path"] == "hatch_build.py"
    assert (ROOT / "hatch_build.py").is_file()
    sdist = project["tool"]["hatch"]["build"]["targets"]["sdist"]
    assert {"console/node_modules", "console/dist"} <= set(sdist["exclude"])
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    for path in ("console/node_modules/", "console/dist/", "src/entrypoints/http/console_dist/"):
        assert path in ignored, path
    assert "playwright==1.65.2" in project["project"]["optional-dependencies"]["dev"]
    assert "playwright==1.65.2" in (ROOT / "constraints.txt").read_text().splitlines()


@pytest.fixture
def hook_module(monkeypatch):
    """hatch_build.py, with a stand-in for hatchling's base class when hatchling (a build-time
    dependency only) is not installed here."""
    import importlib.util
    import sys
    import types

    try:
        import hatchling.builders.hooks.plugin.interface  # noqa: F401
    except ImportError:
        names = ("hatchling", "hatchling.builders", "hatchling.builders.hooks")
        for name in (*names, "hatchling.builders.hooks.plugin"):
            monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
        interface = types.ModuleType("hatchling.builders.hooks.plugin.interface")
        interface.BuildHookInterface = type("BuildHookInterface", (), {})
        monkeypatch.setitem(sys.modules, interface.__name__, interface)
    spec = importlib.util.spec_from_file_location("hatch_build", ROOT / "hatch_build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_hook(module: Any, root: Path, target: str, version: str) -> dict[str, Any]:
    hook = module.ConsoleBuildHook.__new__(module.ConsoleBuildHook)
    # hatchling's own attributes, as its builder sets them.
    type(hook).root = property(lambda self: str(root))
    type(hook).target_name = property(lambda self: target)
    build_data: dict[str, Any] = {"force_include": {}}
    hook.initialize(version, build_data)
    return build_data


def test_the_build_hook_packs_a_built_console_and_leaves_editable_installs_alone(
    hook_module, tmp_path
):
    dist = tmp_path / "console" / "dist"
    dist.mkdir(parents=True)
    (dist / "index.html").write_text("<!doctype html>")
    packed = run_hook(hook_module, tmp_path, "wheel", "standard")
    assert packed["force_include"] == {str(dist): "entrypoints/http/console_dist"}
    assert run_hook(hook_module, tmp_path, "wheel", "editable")["force_include"] == {}
    assert run_hook(hook_module, tmp_path, "sdist", "standard")["force_include"] == {}


def test_the_build_hook_says_what_is_missing_to_build_the_console(
    hook_module, tmp_path, monkeypatch
):
    (tmp_path / "console").mkdir()
    with pytest.raises(RuntimeError, match=r"package\.json is missing"):
        run_hook(hook_module, tmp_path, "wheel", "standard")
    (tmp_path / "console" / "package.json").write_text("{}")
    monkeypatch.setattr(hook_module.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match=r"needs Node\.js .* and npm"):
        run_hook(hook_module, tmp_path, "wheel", "standard")


def test_the_build_hook_rebuilds_a_console_older_than_its_sources(hook_module, tmp_path):
    console = tmp_path / "console"
    (console / "src").mkdir(parents=True)
    (console / "dist").mkdir()
    source = console / "src" / "main.tsx"
    source.write_text("export {}")
    built = console / "dist" / "index.html"
    built.write_text("<!doctype html>")
    os.utime(source, (1_000, 1_000))
    assert not hook_module.stale(console)
    os.utime(built, (500, 500))  # a source changed since the build: it would ship stale
    assert hook_module.stale(console)
    built.unlink()
    assert hook_module.stale(console)
