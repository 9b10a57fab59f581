"""The `Chunker` on llama-index-core: pages, then Markdown sections, then sentence windows.

The text is first cut at the `<!-- page N -->` markers the extractor writes between PDF
pages, so that a passage never straddles two pages and cites exactly one. `MarkdownNodeParser`
then cuts each page at headings; adjacent sections that fit in `size` tokens together stay
together, whole, so that short sections do not become passages of their own; and
`SentenceSplitter` cuts each section, or run of sections, into windows of `size` tokens with
`overlap` tokens shared between neighbours. A passage never holds part of one section with
another section. Each passage keeps its character span in the Markdown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import cached_property
from typing import Any

from domain.chunks import TextChunk
from domain.extraction import ExtractedDocument

PAGE_MARKER = re.compile(r"<!--\s*page\s+(\d+)\s*-->")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s")


def _pages(markdown: str, paged: bool) -> Iterator[tuple[int | None, int, str]]:
    """(page number, offset, text) of each page; one part without a number when unpaged."""
    markers = list(PAGE_MARKER.finditer(markdown))
    if not markers:
        yield (1 if paged else None), 0, markdown
        return
    if markdown[: markers[0].start()].strip():
        yield None, 0, markdown[: markers[0].start()]
    for marker, following in zip(markers, [*markers[1:], None], strict=True):
        end = following.start() if following else len(markdown)
        yield int(marker.group(1)), marker.end(), markdown[marker.end() : end]


def _locate(haystack: str, needle: str, cursor: int) -> int:
    found = haystack.find(needle, cursor)
    return found if found >= 0 else cursor


class LlamaIndexChunker:
    """`Chunker` built from llama-index node parsers."""

    # llama-index is imported at the first split, not with the module: it takes about two
    # seconds, which every `serve` start paid although only workers split text.
    @cached_property
    def _sections(self) -> Any:
        from llama_index.core.node_parser import MarkdownNodeParser

        return MarkdownNodeParser(include_metadata=False, include_prev_next_rel=False)

    @cached_property
    def _tokenizer(self) -> Callable[[str], list[int]]:
        from llama_index.core.utils import get_tokenizer

        tokenizer: Callable[[str], list[int]] = get_tokenizer()
        return tokenizer

    def split(self, document: ExtractedDocument, *, size: int, overlap: int) -> list[TextChunk]:
        from llama_index.core.node_parser import SentenceSplitter

        splitter = SentenceSplitter(
            chunk_size=size, chunk_overlap=overlap, tokenizer=self._tokenizer
        )
        chunks: list[TextChunk] = []
        for page, page_offset, page_text in _pages(document.markdown, bool(document.pages)):
            if not page_text.strip():
                continue
            for section_start, text in self._packed(page_text, size):
                piece_cursor = 0
                for piece in splitter.split_text(text):
                    relative = _locate(text, piece, piece_cursor)
                    piece_cursor = relative + 1
                    if not piece.strip():
                        continue
                    start = page_offset + section_start + relative
                    chunks.append(
                        TextChunk(
                            index=len(chunks),
                            text=piece.strip(),
                            page_number=page,
                            start_char=start,
                            end_char=start + len(piece),
                        )
                    )
        return chunks

    def _packed(self, text: str, size: int) -> Iterator[tuple[int, str]]:
        """(offset, text) of each run of adjacent whole sections that fit in `size` tokens
        together; a section too large for that is a run of its own."""
        run: tuple[int, int, str] | None = None  # start, end, text
        for start, content in self._sections_of(text):
            end = start + len(content)
            if run is not None and len(self._tokenizer(text[run[0] : end])) <= size:
                run = (run[0], end, text[run[0] : end])
                continue
            if run is not None:
                yield run[0], run[2]
            run = (start, end, content)
        if run is not None:
            yield run[0], run[2]

    def _sections_of(self, text: str) -> Iterator[tuple[int, str]]:
        """(offset, text) of each Markdown section; a section that is only headings (a title
        above the first subsection) is joined to the one that follows it."""
        cursor = 0
        pending: int | None = None
        from llama_index.core import Document

        for node in self._sections.get_nodes_from_documents([Document(text=text)]):
            content = node.get_content()
            start = _locate(text, content, cursor)
            cursor = start + 1
            if pending is not None:
                start, content = pending, text[pending : start + len(content)]
                pending = None
            lines = [line for line in content.splitlines() if line.strip()]
            if lines and all(HEADING.match(line) for line in lines):
                pending = start
                continue
            yield start, content
        if pending is not None:
            yield pending, text[pending:]
