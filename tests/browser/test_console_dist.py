"""The built console (`console/dist`) loads nothing from outside the service: no external
address in the page's `src`/`href`, in the style sheets' `url()`/`@import`, or anywhere in the
scripts except identifiers that are never fetched (allow-listed below). The browser tests add
the other half: every page they open requests nothing but loopback (tests/browser/support.py).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from tests.browser.support import DIST, require_console

EXTERNAL = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)
"""An absolute or protocol-relative address (`https://…`, `//cdn…`, `ws://…`)."""

URL_IN_TEXT = re.compile(r"(?:https?|wss?)://[^\s\"'`)<>\\]*", re.IGNORECASE)

# Addresses the bundled libraries carry as plain strings and never request: names, bases for
# parsing a relative address, and links printed in error messages. Exact strings, except the
# prefixes in ALLOWED_PREFIXES.
ALLOWED_IN_SCRIPTS = {
    # XML namespace URIs (React DOM creating SVG and MathML elements, XLink and xml: attributes).
    "http://www.w3.org/2000/svg",
    "http://www.w3.org/1999/xlink",
    "http://www.w3.org/1999/xhtml",
    "http://www.w3.org/1998/Math/MathML",
    "http://www.w3.org/XML/1998/namespace",
    # JSON Schema `$schema` identifiers (zod's JSON Schema output, in the AI SDK).
    "https://json-schema.org/draft/2020-12/schema",
    "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-04/schema#",
    # zod's IPv6 check parses `new URL(`http://[${address}]`)`.
    "http://[${e}]",
    # Bases for `new URL(relative, base)` (React Router, oidc-client-ts reading its callback).
    "http://localhost",
    "http://127.0.0.1",
    # remark-gfm's autolinks: the scheme it puts before a bare `www.` link in an answer.
    "http://",
    # Links in libraries' error messages (React Router, hast-util-to-jsx-runtime).
    "https://reactrouter.com/en/main/routers/picking-a-router.",
    "https://github.com/ungap/url-search-params.",
    "https://github.com/syntax-tree/hast-util-to-jsx-runtime",
}
ALLOWED_PREFIXES = (
    # React's production error messages point at its error decoder.
    "https://react.dev/errors/",
)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in {"src", "href", "srcset", "action", "poster", "data"} and value:
                self.links.append(f"<{tag} {name}={value!r}>")
                if EXTERNAL.match(value):
                    self.external.append(f"<{tag} {name}={value!r}>")


def files(suffix: str) -> list[Path]:
    require_console()
    return sorted(DIST.rglob(f"*{suffix}"))


def test_index_html_links_only_to_the_service():
    require_console()
    parser = _Links()
    parser.feed((DIST / "index.html").read_text())
    assert parser.links, "index.html loads no script or style sheet: is the build complete?"
    assert parser.external == []


def test_style_sheets_load_nothing_from_elsewhere():
    found = []
    for sheet in files(".css"):
        text = sheet.read_text()
        for match in re.finditer(r"url\(\s*['\"]?([^'\")]*)", text):
            if EXTERNAL.match(match.group(1)):
                found.append(f"{sheet.name}: url({match.group(1)})")
        for match in re.finditer(r"@import\s+(?:url\()?\s*['\"]?([^'\";)]*)", text):
            found.append(f"{sheet.name}: @import {match.group(1)}")
    assert found == []


def test_scripts_hold_no_address_but_the_allowed_identifiers():
    scripts = files(".js")
    assert scripts, f"no script under {DIST}"
    found = set()
    for script in scripts:
        for match in URL_IN_TEXT.finditer(script.read_text()):
            address = match.group(0)
            if address not in ALLOWED_IN_SCRIPTS and not address.startswith(ALLOWED_PREFIXES):
                found.add(f"{script.relative_to(DIST)}: {address}")
    assert sorted(found) == []
