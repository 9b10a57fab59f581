from __future__ import annotations

from typing import Protocol


class HtmlSanitizer(Protocol):
    """Makes HTML that an organization's admin wrote safe for a console to render.

    What comes out keeps formatting (paragraphs, emphasis, lists, headings, quotes, code,
    links) and nothing that runs or restyles the page: no `script`, `style` or `iframe`
    element survives, nor any event-handler attribute (`onerror`, `onclick`, ...), `style`
    attribute or URL other than http, https and mailto (`javascript:` and `data:` go, however
    they are encoded). Links get `rel="noopener noreferrer"`. Text is kept, escaped where it
    would otherwise be read as markup. The same input always gives the same output, and
    sanitizing an output again leaves it unchanged.
    """

    def sanitize(self, html: str) -> str:
        """`html` with everything outside the allowed tags and attributes removed."""
        ...
