"""`HtmlSanitizer` with nh3 (the Python binding of ammonia, an HTML5 parser-based allow-list
sanitizer): HTML is parsed as a browser would parse it, then only the tags, attributes and URL
schemes listed here are written back out."""

from __future__ import annotations

import nh3

TAGS = frozenset(
    {
        "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "div", "dl", "dt", "em",
        "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "ins", "kbd", "li", "mark", "ol", "p",
        "pre", "q", "s", "small", "span", "strong", "sub", "sup", "u", "ul",
    }
)  # fmt: skip
ATTRIBUTES = {
    "a": {"href", "title", "target"},
    "abbr": {"title"},
    "ol": {"start"},
    "*": {"lang", "dir"},
}
# Elements whose content is code or a document of its own: dropped with their content, where
# the other unknown elements leave their text behind.
DROPPED_WITH_CONTENT = frozenset(
    {
        "script", "style", "iframe", "frame", "frameset", "object", "embed", "noscript",
        "noembed", "noframes", "template", "textarea", "select", "title", "xmp", "svg", "math",
    }
)  # fmt: skip
URL_SCHEMES = frozenset({"http", "https", "mailto"})


class Nh3HtmlSanitizer:
    """`HtmlSanitizer` with nh3. Relative URLs are dropped too: the HTML is shown on pages whose
    address it cannot know."""

    def __init__(self) -> None:
        self._cleaner = nh3.Cleaner(
            tags=set(TAGS),
            clean_content_tags=set(DROPPED_WITH_CONTENT),
            attributes={tag: set(names) for tag, names in ATTRIBUTES.items()},
            url_schemes=set(URL_SCHEMES),
            url_relative="deny",
            link_rel="noopener noreferrer",
            strip_comments=True,
        )

    def sanitize(self, html: str) -> str:
        return self._cleaner.clean(html) if html else ""
