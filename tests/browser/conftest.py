"""The browser tests' fixtures: one Playwright and one system Chromium per module (its tests share
them), and a full-page screenshot of every open page of a failing test under
`test-artifacts/` at the repository root."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Playwright, expect, sync_playwright

from tests.browser.backend import Console, running_console, upload, wait_for_files
from tests.browser.support import (
    AXE,
    ROOT,
    Guard,
    guarded_context,
    launch_chromium,
    require_console,
)
from tests.integration.extraction_samples import pdf

ARTIFACTS = ROOT / "test-artifacts"

# A loaded 2-core machine renders and answers slower than a laptop: more than the default 5 s.
expect.set_options(timeout=15_000)


# Per module, not per session: Playwright's sync API keeps its event loop marked as running in
# the thread while it is started, which breaks every asyncio test the same xdist worker runs
# after it ("Runner.run() cannot be called from a running event loop").
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    require_console()
    chromium = launch_chromium(playwright)
    yield chromium
    chromium.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report = yield
    if report.failed and call.when in {"setup", "call"}:
        browser = item.funcargs.get("browser") if hasattr(item, "funcargs") else None
        if isinstance(browser, Browser):
            _screenshot(item.nodeid, browser)
    return report


def _screenshot(node_id: str, browser: Browser) -> None:
    """Every page of every context still open, as `<node id>[-n].png`."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", node_id).strip("_")
    pages = [page for context in browser.contexts for page in context.pages]
    ARTIFACTS.mkdir(exist_ok=True)
    for index, page in enumerate(pages):
        suffix = f"-{index}" if index else ""
        try:
            page.screenshot(path=ARTIFACTS / f"{name}{suffix}.png", full_page=True, timeout=10_000)
        except Exception as error:  # a closed or crashed page: note it, keep the report
            print(f"no screenshot of {page.url}: {error}")


@pytest.fixture(scope="module")
def console(tmp_root: Path) -> Iterator[Console]:
    """One `serve` for a module's browser tests (xdist keeps a module on one worker, see
    tests/conftest.py); each test works in an organization of its own."""
    require_console()
    # Under tests/conftest.py's `tmp_root` (readable by the embedded PostgreSQL's own user when
    # the tests run as root), in a directory of this module's own.
    home = Path(tempfile.mkdtemp(prefix="console-", dir=tmp_root))
    home.chmod(0o755)
    yield from running_console(home / "data")


@pytest.fixture
def guard(browser: Browser) -> Iterator[Guard]:
    """A fresh context that allows only loopback; checked (nothing off loopback, no CSP
    violation, no unexpected console error) when the test ends."""
    watched = guarded_context(browser)
    yield watched
    try:
        if not watched.checked:
            watched.check()
    finally:
        watched.context.close()


@pytest.fixture
def axe_guard(browser: Browser) -> Iterator[Guard]:
    """A guarded context without the console's CSP: axe-core is injected as an inline script."""
    if not AXE.is_file():
        raise RuntimeError(f"axe-core is missing ({AXE}): `make test` installs it")
    watched = guarded_context(browser, bypass_csp=True)
    yield watched
    watched.context.close()


@dataclass(frozen=True)
class Library:
    """An organization with a knowledge base of two processed files (a two-page PDF and a
    Markdown note) and an agent that has it, arranged through the API."""

    org: str
    token: str
    kb_id: int
    kb_name: str
    agent_id: int
    agent_name: str
    pdf_name: str
    note_name: str


LIBRARY_PDF = pdf(
    ["The lighthouse keeper feeds the harbour cat at dawn.", "The tide tables of the harbour."]
)
LIBRARY_NOTE = b"# Opening hours\n\nThe harbour office opens at nine.\n"


@pytest.fixture(scope="module")
def library(console: Console) -> Library:
    org = "org_library"
    token = console.token(org)
    with console.api(token) as api:
        created = api.post("/kb/manage", json={"name": "Harbour guide"})
        assert created.status_code == 201, created.text
        kb_id = created.json()["knowledgeBase"]["id"]
        upload(api, kb_id, "guide.pdf", LIBRARY_PDF, "application/pdf")
        upload(api, kb_id, "opening-hours.md", LIBRARY_NOTE, "text/markdown")
        files = wait_for_files(api, kb_id)
        assert {f["processingStatus"] for f in files} == {"completed"}, files
        agent = api.post("/agents", json={"name": "Librarian", "knowledgeBaseIds": [kb_id]})
        assert agent.status_code == 201, agent.text
    return Library(
        org=org,
        token=token,
        kb_id=kb_id,
        kb_name="Harbour guide",
        agent_id=agent.json()["agent"]["id"],
        agent_name="Librarian",
        pdf_name="guide.pdf",
        note_name="opening-hours.md",
    )
