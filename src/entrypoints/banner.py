"""What `serve` prints once it listens: the service's address, the console's when the app
serves one (with the development identity provider, a link that signs in as the README's
administrator; how to build it when it is not built), and the command that prints a
development token.

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
from entrypoints.http.console import BUILD_COMMAND, NPM_BUILD_COMMAND
from entrypoints.wiring import dev_identity_provider

DEFAULT_DATA_DIR = Path(".agent-platform")
PROGRAM = "agent-platform"
CONSOLE_PATH = "/console/"
# The organization and user of the README's walkthrough.
TOKEN_ARGUMENTS = ("token", "--org", "org_demo", "--user", "user_ada", "--role", "admin")
HAND_OFF_TTL = 12 * 3600  # the link works for a working day
NOT_BUILT = f"not built: run `{BUILD_COMMAND}` ({NPM_BUILD_COMMAND}), then reload"
Console = bool | None  # built, not built, or no console served
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
            announce(settings, listening_url(settings), console_state(app))

    return notify


def announce(settings: Settings, url: str, console: Console = None) -> None:
    """Print (or log, in JSON) that the service answers at `url`; `console`: whether the
    console it serves is built (None: it serves none)."""
    build = NOT_BUILT if console is False else None
    token = token_command(settings) if settings.dev_identity else None
    if settings.log_format == "json":
        # Logs are kept and shipped: the console's address without a sign-in token in it.
        fields = {
            "url": url,
            "console_url": f"{url}{CONSOLE_PATH}" if console else None,
            "console_build": BUILD_COMMAND if build else None,
            "token_command": token,
        }
        log.info("serve.ready", **{k: v for k, v in fields.items() if v is not None})
        return
    console_url = console_link(settings, url) if console else None
    print(banner(url, console_url=console_url or build, token=token), flush=True)


def console_link(settings: Settings, url: str) -> str:
    """The console's address; with the development identity provider, a hand-off link that
    signs in as the README's administrator (`#access_token=`, which the console keeps in
    session storage and removes from the address bar)."""
    if not settings.dev_identity:
        return f"{url}{CONSOLE_PATH}"
    token = dev_identity_provider(settings).issue(
        user_id="user_ada", org_id="org_demo", role="admin", ttl=HAND_OFF_TTL
    )
    return f"{url}{CONSOLE_PATH}#access_token={token}"


def banner(url: str, *, console_url: str | None = None, token: str | None = None) -> str:
    """The banner's text: a title, then one row per thing to open or run, labels aligned;
    `console_url` is the console's link, or how to build it."""
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
    """Whether `app` has a route at or under `/console/` (the contract's console)."""
    paths = [getattr(route, "path", "") for route in getattr(app, "routes", None) or []]
    return any(
        path.rstrip("/") == CONSOLE_PATH.rstrip("/") or path.startswith(CONSOLE_PATH)
        for path in paths
    )


def console_state(app: Any) -> Console:
    """Whether `app`'s console is built; None when it serves none."""
    if not serves_console(app):
        return None
    site = getattr(getattr(app, "state", None), "console", None)
    return bool(site is not None and site.built)
