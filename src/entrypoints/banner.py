"""What `serve` prints once it listens: the service's address, the console's when the app
serves one, and the command that prints a development token.

`when_listening` is the uvicorn configuration's `callback_notify`, which uvicorn first calls
once its sockets are bound (after the application's own start-up), so the banner never comes
before a request could be answered. On a terminal (`AP_LOG_FORMAT=console`) it is a few plain
lines on standard output; in JSON it is one `serve.ready` log line with the same fields.
"""

from __future__ import annotations

import contextlib
import shlex
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog

from entrypoints.config import Settings

DEFAULT_DATA_DIR = Path(".agent-platform")
PROGRAM = "agent-platform"
CONSOLE_PATH = "/console/"
# The organization and user of the README's walkthrough.
TOKEN_ARGUMENTS = ("token", "--org", "org_demo", "--user", "user_ada", "--role", "admin")
# A listen address that stands for every interface: the banner shows loopback instead.
EVERY_INTERFACE = {"", "0.0.0.0", "::"}  # noqa: S104 (names them, binds nothing)
log = structlog.get_logger("agent_platform.serve")


def when_listening(settings: Settings, app: Any = None) -> Callable[[], Awaitable[None]]:
    """uvicorn's `callback_notify`, printing the banner: uvicorn calls it at its main loop's
    first tick, once the sockets are bound (a start-up that failed never gets there), then
    every `timeout_notify` seconds, when it does nothing. `app` (the Litestar app) tells
    whether a console is served."""
    done = False

    async def notify() -> None:
        nonlocal done
        if not done:
            done = True
            announce(settings, listening_url(settings), serves_console(app))

    return notify


def announce(settings: Settings, url: str, console: bool = False) -> None:
    """Print (or log, in JSON) that the service answers at `url`."""
    console_url = f"{url}{CONSOLE_PATH}" if console else None
    token = token_command(settings) if settings.dev_identity else None
    if settings.log_format == "json":
        fields = {"url": url, "console_url": console_url, "token_command": token}
        log.info("serve.ready", **{k: v for k, v in fields.items() if v is not None})
        return
    print(banner(url, console_url=console_url, token=token), flush=True)


def banner(url: str, *, console_url: str | None = None, token: str | None = None) -> str:
    """The banner's text: a title, then one row per thing to open or run, labels aligned."""
    rows = [("API", url), ("API reference", f"{url}/schema")]
    if console_url is not None:
        rows.append(("Console", console_url))
    if token is not None:
        rows.append(("Get a token", token))
    width = max(len(label) for label, _ in rows)
    lines = ["", "Agent Platform is ready (Ctrl-C stops it)"]
    lines += [f"  {label:<{width}}  {value}" for label, value in rows]
    return "\n".join([*lines, ""])  # set apart from the log lines around it


def token_command(settings: Settings) -> str:
    """The command that prints a token this process accepts: the program as it was started
    (`.venv/bin/agent-platform` under `make serve`), with the data folder when it is not the
    default one (the signing key lives there)."""
    program = sys.argv[0] if Path(sys.argv[0]).name == PROGRAM else PROGRAM
    if Path(program).is_absolute():
        with contextlib.suppress(ValueError):
            program = str(Path(program).relative_to(Path.cwd()))
    command = shlex.join([program, *TOKEN_ARGUMENTS])
    if settings.data_dir != DEFAULT_DATA_DIR:
        command = f"AP_DATA_DIR={shlex.quote(str(settings.data_dir))} {command}"
    return command


def listening_url(settings: Settings) -> str:
    """`http://host:port` of `serve`'s socket, an every-interface address shown as loopback."""
    host = "127.0.0.1" if settings.host in EVERY_INTERFACE else settings.host
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.port}"


def serves_console(app: Any) -> bool:
    """Whether `app` has a route at or under `/console/` (the contract's console; none yet)."""
    paths = [getattr(route, "path", "") for route in getattr(app, "routes", None) or []]
    return any(
        path.rstrip("/") == CONSOLE_PATH.rstrip("/") or path.startswith(CONSOLE_PATH)
        for path in paths
    )
