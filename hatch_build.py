"""hatchling's build hook: a regular wheel carries the built web console.

The console (console/, React + Vite) is built into console/dist by npm; the wheel carries that
folder as `entrypoints/http/console_dist`, which the service serves at /console/
(`entrypoints.http.console`). When console/dist/index.html is missing or older than a source of
the console (so that a wheel never carries a stale build), the hook builds it first (`npm ci`
then `npm run build`), which needs Node.js and npm; the Dockerfile builds it in a Node
stage instead, so that the Python stage needs none. An editable install does nothing: the
service then serves the repository's console/dist (`make console` builds it).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGED_AS = "entrypoints/http/console_dist"
BUILD = "npm ci --prefix console && npm run build --prefix console"


class ConsoleBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        console = Path(self.root) / "console"
        dist = console / "dist"
        if stale(console):
            build_console(console)
        build_data["force_include"][str(dist)] = PACKAGED_AS


# What the build is made from: a change to any of these makes console/dist stale.
SOURCES = ("src", "public", "index.html", "package.json", "package-lock.json", "vite.config.ts")


def stale(console: Path) -> bool:
    """Whether console/dist is missing or older than one of the console's sources."""
    built = console / "dist" / "index.html"
    if not built.is_file():
        return True
    newest = 0.0
    for name in SOURCES:
        path = console / name
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        newest = max([newest, *(f.stat().st_mtime for f in files)])
    return newest > built.stat().st_mtime


def build_console(console: Path) -> None:
    """`npm ci` and `npm run build` in `console`, or a clear error saying what is missing."""
    if not (console / "package.json").is_file():
        raise RuntimeError(
            f"{console}/package.json is missing: the wheel is built from the repository or "
            "from its source distribution, which carry the console's sources"
        )
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(
            "Building the wheel builds the web console (console/dist), which needs Node.js "
            "(22 or later) and npm: install them (apt-get install nodejs npm) and build "
            f"again, or build it first with `{BUILD}`"
        )
    print(f"agent-platform: building the web console ({BUILD})", flush=True)
    prefix = str(console)
    for command in (
        [npm, "ci", "--prefix", prefix, "--no-audit", "--no-fund"],
        [npm, "run", "build", "--prefix", prefix],
    ):
        subprocess.run(command, check=True)  # noqa: S603 (npm, found on PATH, fixed arguments)
    if not (console / "dist" / "index.html").is_file():
        raise RuntimeError(f"`npm run build` left no {console}/dist/index.html")
