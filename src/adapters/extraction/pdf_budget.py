"""What a PDF grows to inside PDFium, measured with pypdf before PDFium loads a page of it.

`FPDF_LoadPage` inflates a page's content streams whole and parses every operator into an
object it keeps while the page is open (25-30 bytes per byte of content); each form the page
draws is parsed again every time it is drawn; `FPDFText_LoadPage` then keeps about 200 bytes
per character. None of that is bounded by PDFium, so a few hundred kilobytes of deflated
operators could take gigabytes. pypdf's object model (decrypted, object streams resolved) and
its capped decoders (`pdf_opening.inflated`) measure, by these rules:

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

from pypdf import PdfReader
from pypdf.generic import DictionaryObject, IndirectObject, NameObject, StreamObject

from adapters.extraction.bounds import megabytes
from adapters.extraction.pdf_content import TextCounter
from adapters.extraction.pdf_opening import document_too_large, inflated, part_too_large
from domain.extraction import ExtractionFailed, ExtractionLimits

_REGULAR = rb"[^\x00\t\n\x0c\r /\[\]()<>{}%]"
_DRAW_XOBJECT = re.compile(rb"/(" + _REGULAR + rb"*+)[\x00\t\n\x0c\r ]*+Do(?!" + _REGULAR + rb")")
# "Do" opening a line: its operand may sit before a comment, out of the pattern above.
_DRAW_AT_LINE_START = re.compile(rb"[\r\n][\x00\t\x0c ]*+Do(?!" + _REGULAR + rb")")
# Stands for the form drawn by a "Do" whose operand could not be read; no name holds a NUL.
_UNKNOWN_FORM = "\x00"
# PDFium stops drawing forms nested deeper than this; deeper still is refused here.
_MAX_FORM_DEPTH = 64
# Streams PDFium never reads to draw or read a page: metadata, thumbnails, attached files,
# scripts, sounds, movies, 3D models and applications' private data.
_UNREAD_KEYS = frozenset(
    {
        "/Metadata",
        "/Thumb",
        "/EF",
        "/FS",
        "/JS",
        "/Sound",
        "/Movie",
        "/3DD",
        "/RichMediaContent",
        "/PieceInfo",
    }
)
# One empty dictionary for every missing one, so that its identity is stable.
_NO_DICTIONARY = DictionaryObject()


@dataclass(slots=True)
class _Usage:
    """How the pages use one stream."""

    stream: StreamObject
    measured: bool = False  # read whole by PDFium somewhere, not only as an image's pixels
    content: bool = False  # parsed as operators: a page's content, a form, a glyph, a pattern


@dataclass(frozen=True, slots=True)
class _Content:
    """One content stream inflated: its size, what its strings may show, the forms it draws."""

    size: int
    text: int
    draws: Counter[str] = field(default_factory=Counter)


def check_pdf_budget(reader: PdfReader, limits: ExtractionLimits) -> None:
    """Raise `ExtractionFailed` if a page or stream of `reader`'s PDF would grow past `limits`,
    or if it has more than `limits.max_pages` pages."""
    pages: list[DictionaryObject] = list(reader.pages)
    if len(pages) > limits.max_pages:
        raise ExtractionFailed(
            f"The PDF has {len(pages):,} pages, more than the limit of {limits.max_pages:,}."
        )
    budget = _Budget(limits)
    budget.classify(pages)
    budget.check_pages(pages)
    budget.check_streams()


def _resolve(value: object) -> object:
    return value.get_object() if isinstance(value, IndirectObject) else value


def _dictionary(value: object) -> DictionaryObject:
    resolved = _resolve(value)
    return resolved if isinstance(resolved, DictionaryObject) else _NO_DICTIONARY


def _get(dictionary: DictionaryObject, key: str) -> object:
    """The value under `key`, resolved."""
    return _resolve(dictionary.raw_get(key)) if key in dictionary else None


def _name(raw: bytes) -> str:
    """A name from content bytes, decoded as pypdf decodes the names of dictionaries."""
    unescaped = NameObject.unnumber(raw)
    for charset in NameObject.CHARSETS:
        try:
            return "/" + unescaped.decode(charset)
        except UnicodeDecodeError:
            continue
    return "/" + unescaped.decode("latin-1")


class _Budget:
    def __init__(self, limits: ExtractionLimits) -> None:
        self._limits = limits
        self._usage: dict[int, _Usage] = {}  # by id() of a stream the usage keeps alive
        self._form_names: set[str] = set()
        self._contents: dict[int, _Content] = {}
        self._sizes: dict[int, int] = {}  # decoded sizes already measured whole
        self._form_costs: dict[tuple[int, int, int], tuple[int, int]] = {}

    # --- Which streams PDFium reads whole, and how -------------------------------------------

    def classify(self, pages: list[DictionaryObject]) -> None:
        """Walk everything the pages refer to and note how each stream is used."""
        seen: set[tuple[int, int]] = set()
        # (value, the key it is found under, the key of the dictionary holding that key)
        stack: list[tuple[object, str, str]] = [(page, "", "") for page in reversed(pages)]
        while stack:
            value, key, container = stack.pop()
            if isinstance(value, IndirectObject):
                target = value.get_object()
                if isinstance(target, StreamObject):
                    self._note_stream(target, key, container)
                if (value.idnum, value.generation) in seen:
                    continue
                seen.add((value.idnum, value.generation))
                value = target
            if isinstance(value, DictionaryObject):
                for child_key in value:
                    if child_key != "/Parent" and child_key not in _UNREAD_KEYS:
                        stack.append((value.raw_get(child_key), str(child_key), key))
            elif isinstance(value, list):
                stack.extend((child, key, container) for child in value)

    def _note_stream(self, stream: StreamObject, key: str, container: str) -> None:
        usage = self._usage.setdefault(id(stream), _Usage(stream))
        subtype = stream.get("/Subtype")
        if container == "/XObject":
            # PDFium draws an image line by line, parses a form, ignores anything else.
            if subtype == "/Form":
                usage.measured = usage.content = True
                self._form_names.add(key)
            return
        if key in ("/SMask", "/Mask") and subtype == "/Image":
            return
        usage.measured = True
        if (
            key == "/Contents"
            or container == "/CharProcs"
            or subtype == "/Form"
            or stream.get("/PatternType") == 1
        ):
            usage.content = True

    # --- Pages -------------------------------------------------------------------------------

    def check_pages(self, pages: list[DictionaryObject]) -> None:
        """Hold each page's content and text, and all pages' content, to the limits."""
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
                raise ExtractionFailed(document_too_large(limits))

    def _page_cost(self, page: DictionaryObject) -> tuple[int, int]:
        """The bytes PDFium parses to load and draw `page`, and the characters it can show."""
        resources = _dictionary(page.raw_get("/Resources") if "/Resources" in page else None)
        size = 0
        draws: Counter[str] = Counter()
        counter = TextCounter()
        for stream in self._content_streams(_get(page, "/Contents")):
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
        annotations = _get(page, "/Annots")
        for annotation in annotations if isinstance(annotations, list) else []:
            for appearance in self._appearances(annotation):
                form_size, _ = self._form_cost(appearance, resources, resources, 0)
                size += form_size
        return size, text

    @staticmethod
    def _content_streams(contents: object) -> Iterator[StreamObject]:
        if isinstance(contents, StreamObject):
            yield contents
        elif isinstance(contents, list):
            for item in contents:
                stream = _resolve(item)
                if isinstance(stream, StreamObject):
                    yield stream

    @staticmethod
    def _appearances(annotation: object) -> Iterator[StreamObject]:
        normal = _get(_dictionary(_get(_dictionary(annotation), "/AP")), "/N")
        if isinstance(normal, StreamObject):
            yield normal
            return
        for state in _dictionary(normal).values():
            stream = _resolve(state)
            if isinstance(stream, StreamObject):
                yield stream

    # --- Forms -------------------------------------------------------------------------------

    def _drawn_forms(
        self,
        draws: Counter[str],
        resources: DictionaryObject,
        page_resources: DictionaryObject,
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
        self, resources: DictionaryObject, page_resources: DictionaryObject
    ) -> list[StreamObject | None]:
        names = {
            str(name)
            for where in (resources, page_resources)
            for name in _dictionary(_get(where, "/XObject"))
        }
        return [self._find_form(name, resources, page_resources) for name in names]

    @staticmethod
    def _find_form(
        name: str, resources: DictionaryObject, page_resources: DictionaryObject
    ) -> StreamObject | None:
        """The form `name` draws: looked up as PDFium does, in the form's resources first."""
        for where in (resources, page_resources):
            xobjects = _dictionary(_get(where, "/XObject"))
            if name in xobjects:
                target = _get(xobjects, name)
                if isinstance(target, StreamObject) and target.get("/Subtype") == "/Form":
                    return target
                return None
        return None

    def _form_cost(
        self,
        form: StreamObject,
        parent_resources: DictionaryObject,
        page_resources: DictionaryObject,
        depth: int,
    ) -> tuple[int, int]:
        """What drawing `form` once costs: its own content and the forms it draws in turn."""
        if depth > _MAX_FORM_DEPTH:
            raise ExtractionFailed("The PDF is nested too deeply to be read.")
        own = _get(form, "/Resources")
        resources = _dictionary(own) if own is not None else parent_resources
        key = (id(form), id(resources), id(page_resources))
        if key in self._form_costs:
            return self._form_costs[key]
        # A form that draws itself is drawn once by PDFium, which skips the repeat.
        self._form_costs[key] = (0, 0)
        content = self._content(form)
        nested_size, nested_text = self._drawn_forms(
            content.draws, resources, page_resources, depth + 1
        )
        cost = (content.size + nested_size, content.text + nested_text)
        self._form_costs[key] = cost
        return cost

    def _content(self, stream: StreamObject) -> _Content:
        known = self._contents.get(id(stream))
        if known is not None:
            return known
        cap = self._limits.max_page_content_bytes
        data = self._inflated(stream, cap)
        if data is None:
            content = _Content(cap + 1, 0)
        else:
            counter = TextCounter()
            counter.feed(data, self._limits.max_page_text_chars)
            content = _Content(len(data), counter.total, self._draws(data))
        self._contents[id(stream)] = content
        return content

    def _draws(self, content: bytes) -> Counter[str]:
        """How often `content` draws each XObject that some /XObject dictionary calls a form."""
        draws: Counter[str] = Counter()
        if not self._form_names:
            return draws
        seen: set[int] = set()
        for match in _DRAW_XOBJECT.finditer(content):
            seen.add(match.end())
            name = _name(match.group(1))
            if name in self._form_names:
                draws[name] += 1
        for match in _DRAW_AT_LINE_START.finditer(content):
            if match.end() not in seen:
                draws[_UNKNOWN_FORM] += 1
        return draws

    # --- Every other stream ------------------------------------------------------------------

    def check_streams(self) -> None:
        """Hold every stream PDFium reads whole to its limit, and all of them together."""
        limits = self._limits
        total = 0
        for key, usage in self._usage.items():
            if not usage.measured:
                continue
            cap = limits.max_page_content_bytes if usage.content else limits.max_stream_bytes
            size = self._sizes.get(key)
            if size is None:
                data = inflated(usage.stream, cap)
                size = cap + 1 if data is None else len(data)
            if size > cap:
                raise ExtractionFailed(part_too_large(cap))
            total += size
            if total > limits.max_decompressed_bytes:
                raise ExtractionFailed(document_too_large(limits))

    def _inflated(self, stream: StreamObject, cap: int) -> bytes | None:
        """The stream's data decoded, or None once it grows past `cap` bytes."""
        data = inflated(stream, cap)
        if data is not None:
            self._sizes[id(stream)] = len(data)
        return data
