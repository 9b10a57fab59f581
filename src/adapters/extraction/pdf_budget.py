"""What a PDF grows to inside PDFium, measured before PDFium loads a page of it.

`FPDF_LoadPage` inflates a page's content streams whole and parses every operator into an
object it keeps while the page is open (25-30 bytes per byte of content); each form the page
draws is parsed again every time it is drawn; `FPDFText_LoadPage` then keeps about 200 bytes
per character. None of that is bounded by PDFium, so a few hundred kilobytes of deflated
operators could take gigabytes.

PDFium first copies the pages into a new document and writes it out (`FPDF_ImportPagesByIndex`,
`FPDF_SaveAsCopy`): neither parses content nor inflates a stream, and the copy holds exactly
the objects PDFium resolved for the pages, decrypted, out of object streams, in one plain
syntax (`pdf_objects`). The copy's streams are then inflated with a cap (`stream_filters`):

- each page's content, forms counted as often as the page draws them, and its annotations'
  appearances, against `max_page_content_bytes`, and the characters its strings can show
  against `max_page_text_chars`;
- every other stream PDFium reads whole (fonts, colour profiles, Type 3 glyphs, patterns)
  against `max_stream_bytes` (`max_page_content_bytes` for those parsed as content);
- all pages' content and all streams once each against `max_decompressed_bytes`.

Image pixels are not inflated here: PDFium decodes images line by line as it renders them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from adapters.extraction.bounds import megabytes
from adapters.extraction.pdf_objects import (
    MalformedPdf,
    Name,
    PdfFile,
    PdfValue,
    Reference,
    Stream,
    decode_name,
    read_pdf,
)
from adapters.extraction.stream_filters import UnsupportedFilter, decode, decoded_size
from domain.extraction import ExtractionFailed, ExtractionLimits

_UNREADABLE = "The file is not a readable PDF."
_REGULAR = rb"[^\x00\t\n\x0c\r /\[\]()<>{}%]"
_DRAW_XOBJECT = re.compile(rb"/(" + _REGULAR + rb"*+)[\x00\t\n\x0c\r ]*+Do(?!" + _REGULAR + rb")")
# "Do" opening a line: its operand may sit before a comment, out of the pattern above.
_DRAW_AT_LINE_START = re.compile(rb"[\r\n][\x00\t\x0c ]*+Do(?!" + _REGULAR + rb")")
# Stands for the form drawn by a "Do" whose operand could not be read; no name holds a NUL.
_UNKNOWN_FORM = b"\x00"
_STRING_OR_HEX_START = re.compile(rb"[(<]")
_IN_STRING = re.compile(rb"[()\\]")
# PDFium stops drawing forms nested deeper than this; deeper still is refused here.
_MAX_FORM_DEPTH = 64
# Streams PDFium never reads to draw or read a page: metadata, thumbnails, attached files,
# scripts, sounds, movies, 3D models and applications' private data.
_UNREAD_KEYS = frozenset(
    {
        b"Metadata",
        b"Thumb",
        b"EF",
        b"FS",
        b"JS",
        b"Sound",
        b"Movie",
        b"3DD",
        b"RichMediaContent",
        b"PieceInfo",
    }
)
# One empty dictionary for every missing one, so that its identity is stable.
_NO_DICTIONARY: dict[Name, PdfValue] = {}


@dataclass(slots=True)
class _Usage:
    """How the pages use one stream."""

    measured: bool = False  # read whole by PDFium somewhere, not only as an image's pixels
    content: bool = False  # parsed as operators: a page's content, a form, a glyph, a pattern


@dataclass(frozen=True, slots=True)
class _Content:
    """One content stream inflated: its size, what its strings may show, the forms it draws."""

    size: int
    text: int
    draws: Counter[bytes] = field(default_factory=Counter)


def check_pdf_budget(pdf: pdfium.PdfDocument, limits: ExtractionLimits) -> None:
    """Raise `ExtractionFailed` if a page or stream of `pdf` would grow past `limits`.

    Must run with the PDFium lock held, before any page of `pdf` is loaded.
    """
    try:
        copy = _pages_copy(pdf)
        document = read_pdf(copy)
    except (pdfium.PdfiumError, MalformedPdf):
        raise ExtractionFailed(_UNREADABLE) from None
    try:
        _Budget(document, copy, limits).check()
    except UnsupportedFilter:
        raise ExtractionFailed(_UNREADABLE) from None


def _pages_copy(pdf: pdfium.PdfDocument) -> bytearray:
    copy = pdfium.PdfDocument.new()
    output = _Output()
    try:
        copy.import_pages(pdf)
        # Only the new document's own /Metadata would be inflated by the writer; it has none.
        copy.save(output, flags=pdfium_c.FPDF_NO_INCREMENTAL)
    finally:
        copy.close()
    return output.data


class _Output:
    """A file-like target for `PdfDocument.save` that keeps a single copy of what is written."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, block: bytes) -> int:
        self.data += block
        return len(block)


class _Budget:
    def __init__(self, document: PdfFile, data: bytearray, limits: ExtractionLimits) -> None:
        self._document = document
        self._data = memoryview(data)
        self._limits = limits
        self._usage: dict[int, _Usage] = {}
        self._form_names: set[bytes] = set()
        self._contents: dict[int, _Content] = {}
        self._sizes: dict[int, int] = {}  # decoded sizes already measured whole
        self._form_costs: dict[tuple[int, int, int], tuple[int, int]] = {}

    def check(self) -> None:
        pages = self._pages()
        self._classify(pages)
        self._check_pages(pages)
        self._check_streams()

    # --- The page tree ---------------------------------------------------------------------

    def _pages(self) -> list[dict[Name, PdfValue]]:
        root = self._dictionary(self._document.trailer.get(Name(b"Root")))
        pages: list[dict[Name, PdfValue]] = []
        seen: set[int] = set()
        stack: list[PdfValue] = [root.get(Name(b"Pages"))]
        while stack:
            node_value = stack.pop()
            if isinstance(node_value, Reference):
                if node_value.number in seen:
                    continue
                seen.add(node_value.number)
            node = self._dictionary(node_value)
            kids = self._document.resolve(node.get(Name(b"Kids")))
            if isinstance(kids, list):
                stack.extend(reversed(kids))
            elif node:
                pages.append(node)
        return pages

    # --- Which streams PDFium reads whole, and how -------------------------------------------

    def _classify(self, pages: list[dict[Name, PdfValue]]) -> None:
        """Walk everything the pages refer to and note how each stream is used."""
        seen: set[int] = set()
        # (value, the key it is found under, the key of the dictionary holding that key)
        stack: list[tuple[PdfValue | Stream, bytes, bytes]] = [
            (page, b"", b"") for page in reversed(pages)
        ]
        while stack:
            value, key, container = stack.pop()
            if isinstance(value, Reference):
                target = self._document.objects.get(value.number)
                if isinstance(target, Stream):
                    self._note_stream(value.number, target, key, container)
                if value.number in seen:
                    continue
                seen.add(value.number)
                value = target
            if isinstance(value, Stream):
                value = value.dictionary
            if isinstance(value, dict):
                for child_key, child in value.items():
                    if child_key != b"Parent" and child_key not in _UNREAD_KEYS:
                        stack.append((child, bytes(child_key), key))
            elif isinstance(value, list):
                stack.extend((child, key, container) for child in value)

    def _note_stream(self, number: int, stream: Stream, key: bytes, container: bytes) -> None:
        usage = self._usage.setdefault(number, _Usage())
        subtype = stream.dictionary.get(Name(b"Subtype"))
        if container == b"XObject":
            # PDFium draws an image line by line, parses a form, ignores anything else.
            if subtype == b"Form":
                usage.measured = usage.content = True
                self._form_names.add(key)
            return
        if key in (b"SMask", b"Mask") and subtype == b"Image":
            return
        usage.measured = True
        if (
            key == b"Contents"
            or container == b"CharProcs"
            or subtype == b"Form"
            or stream.dictionary.get(Name(b"PatternType")) == 1
        ):
            usage.content = True

    # --- Pages -------------------------------------------------------------------------------

    def _check_pages(self, pages: list[dict[Name, PdfValue]]) -> None:
        limits = self._limits
        total = 0
        for number, page in enumerate(pages, start=1):
            size, text = self._page_cost(page)
            if size > limits.max_page_content_bytes:
                raise ExtractionFailed(
                    f"Page {number} of this PDF is too large to process: its content inflates "
                    f"past {megabytes(limits.max_page_content_bytes)}."
                )
            if text > limits.max_page_text_chars:
                raise ExtractionFailed(
                    f"Page {number} of this PDF holds too much text to process: more than "
                    f"{limits.max_page_text_chars:,} characters."
                )
            total += size
            if total > limits.max_decompressed_bytes:
                raise self._too_large()

    def _page_cost(self, page: dict[Name, PdfValue]) -> tuple[int, int]:
        """The bytes PDFium parses to load and draw `page`, and the characters it can show."""
        resources = self._dictionary(page.get(Name(b"Resources")))
        size = text = 0
        draws: Counter[bytes] = Counter()
        counter = _TextCounter()
        for stream in self._content_streams(page.get(Name(b"Contents"))):
            # The streams of one page are parsed as one: a string may run on into the next.
            data = self._inflated(stream, self._limits.max_page_content_bytes - size)
            if data is None:
                return self._limits.max_page_content_bytes + 1, 0
            size += len(data)
            counter.feed(data, self._limits.max_page_text_chars)
            draws.update(self._draws(data))
        text = counter.total
        form_size, form_text = self._drawn_forms(draws, resources, resources, 0)
        size, text = size + form_size, text + form_text
        annotations = self._document.resolve(page.get(Name(b"Annots")))
        for annotation in annotations if isinstance(annotations, list) else []:
            for appearance in self._appearances(annotation):
                form_size, _ = self._form_cost(appearance, resources, resources, 0)
                size += form_size
        return size, text

    def _content_streams(self, contents: PdfValue) -> Iterator[Reference]:
        resolved = self._document.resolve(contents)
        if isinstance(resolved, Stream) and isinstance(contents, Reference):
            yield contents
        elif isinstance(resolved, list):
            for item in resolved:
                if isinstance(item, Reference):
                    yield item

    def _appearances(self, annotation: PdfValue) -> Iterator[Reference]:
        appearance = self._dictionary(self._dictionary(annotation).get(Name(b"AP")))
        normal = appearance.get(Name(b"N"))
        if isinstance(self._document.resolve(normal), Stream) and isinstance(normal, Reference):
            yield normal
            return
        for state in self._dictionary(normal).values():
            if isinstance(state, Reference):
                yield state

    # --- Forms -------------------------------------------------------------------------------

    def _drawn_forms(
        self,
        draws: Counter[bytes],
        resources: dict[Name, PdfValue],
        page_resources: dict[Name, PdfValue],
        depth: int,
    ) -> tuple[int, int]:
        size = text = 0
        for name, times in draws.items():
            forms = (
                self._all_forms(resources, page_resources)
                if name == _UNKNOWN_FORM
                else [self._find_form(name, resources, page_resources)]
            )
            costs = [
                self._form_cost(form, resources, page_resources, depth)
                for form in forms
                if form is not None
            ]
            if costs:
                form_size, form_text = max(costs)
                size += times * form_size
                text += times * form_text
                if size > self._limits.max_page_content_bytes:
                    break
        return size, text

    def _all_forms(
        self, resources: dict[Name, PdfValue], page_resources: dict[Name, PdfValue]
    ) -> list[Reference | None]:
        names = {
            bytes(name)
            for where in (resources, page_resources)
            for name in self._dictionary(where.get(Name(b"XObject")))
        }
        return [self._find_form(name, resources, page_resources) for name in names]

    def _find_form(
        self, name: bytes, resources: dict[Name, PdfValue], page_resources: dict[Name, PdfValue]
    ) -> Reference | None:
        """The form `name` draws: looked up as PDFium does, in the form's resources first."""
        for where in (resources, page_resources):
            xobjects = self._dictionary(where.get(Name(b"XObject")))
            found = xobjects.get(Name(name))
            if found is not None:
                target = self._document.resolve(found)
                is_form = isinstance(target, Stream) and target.dictionary.get(
                    Name(b"Subtype")
                ) == Name(b"Form")
                return found if is_form and isinstance(found, Reference) else None
        return None

    def _form_cost(
        self,
        form: Reference,
        parent_resources: dict[Name, PdfValue],
        page_resources: dict[Name, PdfValue],
        depth: int,
    ) -> tuple[int, int]:
        """What drawing `form` once costs: its own content and the forms it draws in turn."""
        stream = self._document.objects.get(form.number)
        if not isinstance(stream, Stream):
            return 0, 0
        if depth > _MAX_FORM_DEPTH:
            raise ExtractionFailed("The PDF is nested too deeply to be read.")
        own = stream.dictionary.get(Name(b"Resources"))
        resources = self._dictionary(own) if own is not None else parent_resources
        key = (form.number, id(resources), id(page_resources))
        if key in self._form_costs:
            return self._form_costs[key]
        # A form that draws itself is drawn once by PDFium, which skips the repeat.
        self._form_costs[key] = (0, 0)
        content = self._content(form.number, stream)
        nested_size, nested_text = self._drawn_forms(
            content.draws, resources, page_resources, depth + 1
        )
        cost = (content.size + nested_size, content.text + nested_text)
        self._form_costs[key] = cost
        return cost

    def _content(self, number: int, stream: Stream) -> _Content:
        known = self._contents.get(number)
        if known is not None:
            return known
        cap = self._limits.max_page_content_bytes
        data = self._inflated(number, cap)
        if data is None:
            content = _Content(cap + 1, 0)
        else:
            counter = _TextCounter()
            counter.feed(data, self._limits.max_page_text_chars)
            content = _Content(len(data), counter.total, self._draws(data))
        self._contents[number] = content
        return content

    def _draws(self, content: bytes) -> Counter[bytes]:
        """How often `content` draws each XObject that some /XObject dictionary calls a form."""
        draws: Counter[bytes] = Counter()
        if not self._form_names:
            return draws
        seen: set[int] = set()
        for match in _DRAW_XOBJECT.finditer(content):
            seen.add(match.end())
            name = match.group(1)
            if b"#" in name:
                name = decode_name(name)
            if name in self._form_names:
                draws[name] += 1
        for match in _DRAW_AT_LINE_START.finditer(content):
            if match.end() not in seen:
                draws[_UNKNOWN_FORM] += 1
        return draws

    # --- Every other stream ------------------------------------------------------------------

    def _check_streams(self) -> None:
        limits = self._limits
        total = 0
        for number, usage in self._usage.items():
            if not usage.measured:
                continue
            stream = self._document.objects[number]
            assert isinstance(stream, Stream)
            cap = limits.max_page_content_bytes if usage.content else limits.max_stream_bytes
            size = self._sizes.get(number)
            if size is None:
                size = decoded_size(self._decoded(stream), cap)
            if size > cap:
                raise ExtractionFailed(
                    f"This PDF is too large to process: part of it inflates past {megabytes(cap)}."
                )
            total += size
            if total > limits.max_decompressed_bytes:
                raise self._too_large()

    # --- Helpers -----------------------------------------------------------------------------

    def _inflated(self, reference: Reference | int, cap: int) -> bytes | None:
        """The stream's data decoded, or None once it grows past `cap` bytes."""
        number = reference.number if isinstance(reference, Reference) else reference
        stream = self._document.objects.get(number)
        if not isinstance(stream, Stream):
            return b""
        pieces: list[bytes] = []
        size = 0
        for piece in self._decoded(stream):
            size += len(piece)
            if size > cap:
                return None
            pieces.append(piece)
        self._sizes[number] = size
        return b"".join(pieces)

    def _decoded(self, stream: Stream) -> Iterator[bytes]:
        dictionary = stream.dictionary
        filters = self._document.resolve(dictionary.get(Name(b"Filter")))
        parameters = self._document.resolve(dictionary.get(Name(b"DecodeParms")))
        names = [
            self._document.resolve(item)
            for item in (filters if isinstance(filters, list) else [filters])
        ]
        values = parameters if isinstance(parameters, list) else [parameters]
        return decode(
            self._data[stream.start : stream.start + stream.length],
            [bytes(name) for name in names if isinstance(name, bytes)],
            [self._document.resolve(item) for item in values],
        )

    def _dictionary(self, value: PdfValue | Stream) -> dict[Name, PdfValue]:
        resolved = self._document.resolve(value)
        if isinstance(resolved, Stream):
            return resolved.dictionary
        return resolved if isinstance(resolved, dict) else _NO_DICTIONARY

    def _too_large(self) -> ExtractionFailed:
        return ExtractionFailed(
            "This PDF is too large once decompressed: more than the limit of "
            f"{megabytes(self._limits.max_decompressed_bytes)}."
        )


class _TextCounter:
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
