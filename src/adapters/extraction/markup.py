"""HTML to Markdown, for uploaded web pages and for DOCX documents converted to HTML by mammoth."""

from __future__ import annotations

import re

from bs4 import BeautifulSoup
from markdownify import MarkdownConverter

from adapters.extraction.text import charset_parameter, decode_text, normalize_newlines
from domain.extraction import ExtractionFailed

# Content a reader never sees on the page; <head> holds only metadata and the tab title.
_INVISIBLE_TAGS = (
    "head",
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "canvas",
    "iframe",
    "object",
    "embed",
)
_META_CHARSET = re.compile(
    rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE
)
_BLANK_LINES = re.compile(r"\n{3,}")


def html_bytes_to_markdown(data: bytes, content_type: str, max_elements: int) -> str:
    """An uploaded HTML page as Markdown; its charset comes from the header or a <meta> tag.

    Beautiful Soup and markdownify take about 100 µs and 1 KiB per tag, so a page with more
    than `max_elements` "<" (each tag has one) is refused before it is parsed.
    """
    charset = charset_parameter(content_type)
    if charset is None:
        declared = _META_CHARSET.search(data[:4096])
        charset = declared.group(1).decode("ascii") if declared else None
    html = decode_text(data, charset)
    if html.count("<") > max_elements:
        raise ExtractionFailed(
            f"The HTML page is too large to process: it has more than {max_elements:,} tags."
        )
    return html_to_markdown(html)


def html_to_markdown(html: str) -> str:
    """Headings as `#` lines, lists, tables and links kept; scripts, styles and <head> dropped."""
    soup = BeautifulSoup(html, "html.parser")
    for tag in soup.find_all(_INVISIBLE_TAGS):
        tag.decompose()
    for image in soup.find_all("img"):
        source = str(image.get("src") or "")
        # An inline image would put megabytes of base64 into the text that is chunked.
        if not source or source.startswith("data:"):
            image.replace_with(str(image.get("alt") or ""))
    converter = MarkdownConverter(
        heading_style="ATX", bullets="-", newline_style="backslash", table_infer_header=True
    )
    markdown = converter.convert_soup(soup)
    lines = (line.rstrip() for line in normalize_newlines(markdown).split("\n"))
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
