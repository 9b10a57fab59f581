"""What the strings of a PDF's content can show, counted without parsing its operators."""

from __future__ import annotations

import re

_STRING_OR_HEX_START = re.compile(rb"[(<]")
_IN_STRING = re.compile(rb"[()\\]")


class TextCounter:
    """An upper bound on the characters the strings of content streams can show.

    Every byte inside a literal string (nesting and escapes as PDFium reads them) and half of
    every hex string counts; strings PDFium would not show (in comments, inline images,
    marked-content properties) only make the bound larger. Stops counting past its budget.
    """

    def __init__(self) -> None:
        self.total = 0
        self._depth = 0
        self._escaped = False
        self._in_hex = False

    def feed(self, data: bytes, budget: int) -> None:
        """Count the strings of `data`, which continues what was fed before."""
        position, end = 0, len(data)
        while position < end and self.total <= budget:
            if self._in_hex:
                close = data.find(b">", position)
                stop = end if close < 0 else close + 1
                self.total += (stop - position + 1) // 2
                self._in_hex = close < 0
                position = stop
            elif self._depth == 0:
                start = _STRING_OR_HEX_START.search(data, position)
                if start is None:
                    return
                position = start.end()
                # A dictionary's "<<" counts one, so that no input costs work without counting.
                self.total += 1
                if start.group() == b"(":
                    self._depth = 1
                elif data[position : position + 1] == b"<":
                    position += 1
                else:
                    self._in_hex = True
            else:
                if self._escaped:
                    self._escaped = False
                    position += 1
                    self.total += 1
                    continue
                special = _IN_STRING.search(data, position)
                if special is None:
                    self.total += end - position
                    return
                self.total += special.end() - position
                position = special.end()
                char = special.group()
                if char == b"\\":
                    self._escaped = True
                elif char == b"(":
                    self._depth += 1
                else:
                    self._depth -= 1
