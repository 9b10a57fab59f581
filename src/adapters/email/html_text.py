"""An HTML mail body as plain text, with the standard library's tokenizer: linear in the size
of the body, so the request that carries it cannot be slowed down by its markup."""

from __future__ import annotations

import re
from html.parser import HTMLParser

_BLOCK_TAGS = (
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "footer", "form",
    "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre",
    "section", "table", "tr", "ul",
)  # fmt: skip
_BLOCKS = frozenset(_BLOCK_TAGS)
_HIDDEN = frozenset({"head", "script", "style", "template", "noscript", "title"})
_SPACES = re.compile(r"[ \t\f\v\r]+")
_BLANK_LINES = re.compile(r"\n{3,}")


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HIDDEN:
            self.hidden += 1
        elif tag in _BLOCKS:
            self.chunks.append("\n")
        if tag == "li":
            self.chunks.append("- ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in _BLOCKS:
            self.chunks.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.chunks.append(data)


def html_to_text(html: str) -> str:
    """The text a reader sees: scripts, styles and the head dropped, block elements on lines
    of their own, runs of blank lines cut to one."""
    parser = _Text()
    parser.feed(html)
    parser.close()
    lines = (_SPACES.sub(" ", line).strip() for line in "".join(parser.chunks).split("\n"))
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip().replace("\x00", "")
