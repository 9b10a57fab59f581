"""The browser tests' harness: the system Chromium under Playwright, and a context that
fails the test on any request that leaves the loopback interface and records the page's
console errors and Content Security Policy violations."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Locator,
    Page,
    Playwright,
    Route,
    expect,
)

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "console" / "dist"
AXE = ROOT / "tests" / "node" / "node_modules" / "axe-core" / "axe.min.js"

CHROMIUM = os.environ.get("AP_CHROMIUM") or "/usr/bin/chromium"
"""Debian's `chromium`: Playwright's own browser download is not reachable here."""

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}

INSTALL_HINT = "`make test` installs it"
BUILD_HINT = "`make test` builds it"


def launch_chromium(playwright: Playwright) -> Browser:
    """The system Chromium, headless; fails loudly (never skips) when it is missing."""
    if not Path(CHROMIUM).is_file():
        raise RuntimeError(
            f"no Chromium at {CHROMIUM} (set AP_CHROMIUM, or install Debian's `chromium`; "
            f"{INSTALL_HINT} with the rest of the test dependencies)"
        )
    return playwright.chromium.launch(headless=True, executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def require_console() -> None:
    """Fails loudly when the console is not built."""
    if not (DIST / "index.html").is_file():
        raise RuntimeError(
            f"the console is not built ({DIST / 'index.html'} is missing): {BUILD_HINT} "
            "(or `npm ci --prefix console && npm run build --prefix console`)"
        )


def is_loopback(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in {"data", "blob", "about"}:
        return True
    return (parts.hostname or "") in LOOPBACK


@dataclass
class Guard:
    """What a guarded context saw: requests off loopback (aborted), console errors, CSP
    violations."""

    context: BrowserContext
    external: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    csp: list[str] = field(default_factory=list)
    allowed_errors: list[str] = field(default_factory=list)
    """Substrings of console errors the test expects (a 402 the page reports, say), matched
    against `<message> (<address>)`."""
    checked: bool = False

    def new_page(self) -> Page:
        page = self.context.new_page()
        page.on("console", self._on_console)
        page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))
        # WebSockets bypass `route`: record any that leaves loopback.
        page.on(
            "websocket",
            lambda socket: None if is_loopback(socket.url) else self.external.append(socket.url),
        )
        return page

    def _on_console(self, message: ConsoleMessage) -> None:
        text = message.text
        line = f"{text} ({message.location.get('url', '')})"
        if "Content Security Policy" in text:
            self.csp.append(line)
        elif message.type == "error" and not any(a in line for a in self.allowed_errors):
            self.errors.append(line)

    def _route(self, route: Route) -> None:
        url = route.request.url
        if is_loopback(url):
            route.continue_()
        else:
            self.external.append(url)
            route.abort("blockedbyclient")

    def check(self) -> None:
        """Asserts nothing left loopback, no CSP violation, no unexpected console error."""
        self.checked = True
        assert not self.external, f"requests off loopback: {self.external}"
        assert not self.csp, f"Content Security Policy violations: {self.csp}"
        assert not self.errors, f"console errors: {self.errors}"


def guarded_context(browser: Browser, **options: Any) -> Guard:
    """A new context (Playwright's `new_context` options) whose requests off loopback are
    aborted and recorded; call `check()` on the result at the end of the test."""
    context = browser.new_context(**options)
    guard = Guard(context)
    context.route("**/*", guard._route)
    return guard


# --- the console's pages ----------------------------------------------------------------------

STATUS_WORDS = re.compile(r"^(Answering…|Done|Stopped|Failed|Waiting for approval)$")


def open_signed_in(guard: Guard, url: str) -> Page:
    """A new page at `url` (a hand-off address), once the chat's input is shown and the token
    has left the address bar."""
    page = guard.new_page()
    page.goto(url)
    expect(page.get_by_label("Message", exact=True)).to_be_visible()
    assert "access_token" not in page.url, page.url
    return page


def chat_status(page: Page) -> Locator:
    """The chat's polite live status (Answering…, Done, Stopped, Failed, Waiting for
    approval)."""
    return page.locator("[role=status][aria-live=polite]").filter(has_text=STATUS_WORDS)


def ask(page: Page, question: str, agent: str | None = None) -> None:
    """Picks `agent` (by its name) if given, types `question` and sends it."""
    if agent is not None:
        page.get_by_label("Agent", exact=True).select_option(label=agent)
    page.get_by_label("Message", exact=True).fill(question)
    page.get_by_role("button", name="Send", exact=True).click()


def last_answer(page: Page) -> Locator:
    """The last assistant message in the message log."""
    return page.get_by_role("log").get_by_role("article", name="Answer").last


# --- accessibility --------------------------------------------------------------------------------

SERIOUS = {"serious", "critical"}

RUN_AXE = """async () => {
  const results = await axe.run(document, { resultTypes: ['violations'] })
  return results.violations.map(v => ({
    id: v.id,
    impact: v.impact,
    help: v.help,
    nodes: v.nodes.map(n => ({ target: n.target.join(' '), summary: n.failureSummary })),
  }))
}"""


def serious_violations(page: Page, where: str) -> list[str]:
    """axe-core's serious and critical violations on `page`, one readable line per node."""
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    violations: list[dict[str, Any]] = page.evaluate(RUN_AXE)
    return [
        f"{where}: [{v['impact']}] {v['id']} ({v['help']}) at {node['target']}: {node['summary']}"
        for v in violations
        if v["impact"] in SERIOUS
        for node in v["nodes"]
    ]
