"""Decoding text of unknown encoding; plain text, Markdown, CSV and JSON as Markdown."""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
from collections.abc import Iterator

import charset_normalizer

from domain.extraction import ExtractionFailed

_BOMS = (
    # UTF-32 first: its little-endian BOM begins with UTF-16's.
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Encodings that legacy files are written in today; detection over every code page it knows
# (Mac, DOS, EBCDIC) picks exotic ones for short Western texts.
_LEGACY_ENCODINGS = (
    "cp1252", "cp1250", "cp1251", "cp1253", "cp1254", "cp1255", "cp1256", "cp1257", "cp1258",
    "latin_1", "iso8859_15", "iso8859_2", "iso8859_5", "iso8859_7", "koi8_r", "koi8_u", "cp866",
    "cp874", "shift_jis", "cp932", "euc_jp", "gb18030", "big5", "euc_kr", "cp949",
    "utf_16_le", "utf_16_be", "utf_32_le", "utf_32_be",
)  # fmt: skip
# Among equally plausible guesses for a Western text, detection often ranks cp1250 first;
# the far more common Windows-1252 wins such ties.
_WESTERN_ENCODINGS = frozenset({"cp1252", "latin_1", "iso8859_15"})
_CSV_DELIMITERS = ",;\t|"
_CSV_SNIFF_CHARS = 16 * 1024
_CSV_SNIFF_LINES = 50


def page_marker(number: int) -> str:
    """The line that opens page `number` in the Markdown; an HTML comment renders as nothing."""
    return f"<!-- page {number} -->"


def decode_text(data: bytes, declared_charset: str | None = None) -> str:
    """`data` as text: BOM, then strict UTF-8, then the declared charset, then detection.

    Never fails on the encoding (the last resort replaces what it cannot map); fails when the
    bytes are not text at all (NUL characters) or hold only whitespace.
    """
    text = _decode(data, declared_charset)
    if "\x00" in text:
        raise ExtractionFailed("The file does not contain readable text.")
    if not text.strip():
        raise ExtractionFailed("The file is empty: it contains only whitespace.")
    return text


def _decode(data: bytes, declared_charset: str | None) -> str:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(encoding, errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if declared_charset:
        try:
            return data.decode(declared_charset)
        except (LookupError, UnicodeError, ValueError):
            pass  # unknown, non-text or wrong charset: detect instead
    matches = list(charset_normalizer.from_bytes(data, cp_isolation=list(_LEGACY_ENCODINGS)))
    if not matches:
        return data.decode("cp1252", errors="replace")
    best = matches[0]
    for match in matches:
        if match.chaos <= best.chaos and match.encoding in _WESTERN_ENCODINGS:
            return data.decode("cp1252", errors="replace")
    return str(best)


def charset_parameter(content_type: str) -> str | None:
    """The `charset=` parameter of a Content-Type header, if any."""
    for parameter in content_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            return value.strip().strip("\"'")
    return None


def text_to_markdown(data: bytes, content_type: str) -> str:
    """Plain text and Markdown are Markdown already: decoded, line endings normalised."""
    return normalize_newlines(decode_text(data, charset_parameter(content_type)))


def normalize_newlines(text: str) -> str:
    """Unix line endings, so splitters and page markers see one convention."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def json_to_markdown(data: bytes, content_type: str, max_chars: int) -> str:
    """The JSON document pretty-printed inside a fenced ```json block; fails past `max_chars`.

    Indenting repeats each level's indentation on every line below it, so a few kilobytes of
    deeply nested arrays print as gigabytes: the printed text is counted as it is produced.
    Parsing is not started at all when the commas and brackets alone, each printed at least
    once, already pass the limit.
    """
    text = decode_text(data, charset_parameter(content_type))
    if text.count(",") + text.count("[") + text.count("{") > max_chars:
        raise ExtractionFailed(text_too_large(max_chars))
    try:
        value = json.loads(text)
        pretty = _bounded_json(value, max_chars)
    except json.JSONDecodeError as error:
        raise ExtractionFailed(
            f"The file is not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}."
        ) from None
    except RecursionError:
        raise ExtractionFailed("The JSON document is nested too deeply to read.") from None
    except ValueError as error:  # e.g. an integer beyond Python's digit limit
        raise ExtractionFailed(f"The file is not valid JSON: {error}.") from None
    return fenced(pretty, "json")


def _bounded_json(value: object, max_chars: int) -> str:
    parts: list[str] = []
    size = 0
    for part in json.JSONEncoder(indent=2, ensure_ascii=False).iterencode(value):
        size += len(part)
        if size > max_chars:
            raise ExtractionFailed(text_too_large(max_chars))
        parts.append(part)
    return "".join(parts)


def fenced(text: str, language: str) -> str:
    """`text` in a code fence longer than any run of backticks inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def csv_to_markdown(data: bytes, content_type: str, max_chars: int) -> str:
    """The CSV as one Markdown table, its first row the header; fails past `max_chars`.

    The rows are read twice, the first time only to learn the table's width (and to fail
    early when the cells alone would print past `max_chars`), so that no list of every cell
    of a large file is ever held.
    """
    text = decode_text(data, charset_parameter(content_type))
    delimiter = _sniff_delimiter(text)
    # A delimiter prints as a cell boundary or as itself (unless its row is blank), so a file
    # with more than the limit is refused before a row of millions of cells is built.
    if text.count(delimiter) > max_chars:
        raise ExtractionFailed(text_too_large(max_chars))
    width = 0
    printed = 0
    for row in _csv_rows(text, delimiter):
        width = max(width, len(row))
        printed += 3 * len(row) + 1  # a row prints at least "| " and " |" or " | " per cell
        if printed > max_chars:
            raise ExtractionFailed(text_too_large(max_chars))
    if not width:
        raise ExtractionFailed("The file is empty: the CSV has no rows.")
    lines: list[str] = []
    size = 0
    for line in _table_lines(_csv_rows(text, delimiter), width):
        size += len(line) + 1
        if size > max_chars:
            raise ExtractionFailed(text_too_large(max_chars))
        lines.append(line)
    return "\n".join(lines)


def _csv_rows(text: str, delimiter: str) -> Iterator[list[str]]:
    """The rows that hold anything but whitespace."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        for row in reader:
            if any(cell.strip() for cell in row):
                yield row
    except csv.Error as error:
        raise ExtractionFailed(f"The CSV file cannot be parsed: {error}.") from None


def _table_lines(rows: Iterator[list[str]], width: int) -> Iterator[str]:
    header = next(rows)
    yield _table_row(header, width)
    yield "|" + " --- |" * width
    for row in rows:
        yield _table_row(row, width)


def _table_row(row: list[str], width: int) -> str:
    cells = [_table_cell(cell) for cell in row] + [""] * (width - len(row))
    return "| " + " | ".join(cells) + " |"


def _table_cell(cell: str) -> str:
    return normalize_newlines(cell.strip()).replace("|", "\\|").replace("\n", "<br>")


def _sniff_delimiter(text: str) -> str:
    lines = text[:_CSV_SNIFF_CHARS].splitlines()
    if len(text) > _CSV_SNIFF_CHARS and len(lines) > 1:
        lines.pop()  # cut mid-line, it would look like a short row to the sniffer
    sample = "\n".join(lines[:_CSV_SNIFF_LINES])
    try:
        return csv.Sniffer().sniff(sample, delimiters=_CSV_DELIMITERS).delimiter
    except csv.Error:
        first_line = lines[0] if lines else ""
        counts = {delimiter: first_line.count(delimiter) for delimiter in _CSV_DELIMITERS}
        best = max(counts, key=lambda delimiter: counts[delimiter])
        return best if counts[best] else ","


def text_too_large(max_chars: int) -> str:
    """The one message for text beyond `ExtractionLimits.max_text_chars`."""
    return f"The extracted text is too large: more than the limit of {max_chars:,} characters."
