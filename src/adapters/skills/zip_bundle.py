"""A skill uploaded as a zip archive, read in memory with the standard library's `zipfile`.

Nothing is extracted to disk. Sizes in the zip's headers are only a first filter: every entry
is decompressed in chunks and counted, and reading stops one byte past a limit. Entries that
macOS adds when it zips a folder (`__MACOSX/…` resource forks and `.DS_Store` files) are
skipped rather than bundled; directory entries carry nothing and are skipped too. The entry
limit counts every entry of the archive, skipped ones included.
"""

from __future__ import annotations

import io
import lzma
import stat
import zipfile
import zlib

from domain.errors import Invalid, field_error
from domain.skills import (
    SKILL_FILE,
    BundledFile,
    SkillBundle,
    check_skill_path,
    guess_content_type,
)

MIB = 1024 * 1024
INVALID_ARCHIVE = "Invalid skill archive"
_CHUNK = 64 * 1024
_ENCRYPTED = 0x1
_MACOS_FOLDER = "__MACOSX"
_MACOS_FILE = ".DS_Store"


def _refuse(message: str) -> Invalid:
    return Invalid(INVALID_ARCHIVE, [field_error("archive", message)])


def _size(limit: int) -> str:
    return f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit} bytes"


def _is_macos_junk(name: str) -> bool:
    segments = name.split("/")
    return segments[0] == _MACOS_FOLDER or segments[-1] == _MACOS_FILE


# zipfile bounds what one read decompresses only for deflate: bzip2 and LZMA inflate a whole
# compressed block at once, whatever the entry declares, so one small entry can ask for
# gigabytes before any count is checked.
_BOUNDED_METHODS = frozenset({zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED})


class ZipSkillBundleReader:
    """`SkillBundleReader` for zip archives, with limits on entries and decompressed bytes."""

    def __init__(
        self,
        *,
        max_entries: int = 500,
        max_entry_bytes: int = 10 * MIB,
        max_total_bytes: int = 50 * MIB,
    ) -> None:
        self._max_entries = max_entries
        self._max_entry_bytes = max_entry_bytes
        self._max_total_bytes = max_total_bytes

    def read(self, archive: bytes) -> SkillBundle:
        """The bundle `archive` holds (see the port's contract); `Invalid` naming `archive`."""
        try:
            with zipfile.ZipFile(io.BytesIO(archive)) as zipped:
                entries = self._entries(zipped)
                folder = _folder(entries)
                paths = _relative_paths(entries, folder)
                contents = self._contents(zipped, entries)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, UnicodeDecodeError, OSError):
            raise _refuse("is not a valid zip archive") from None
        skill_md = contents.pop(SKILL_FILE if folder is None else f"{folder}/{SKILL_FILE}")
        try:
            text = skill_md.decode("utf-8")
        except UnicodeDecodeError:
            raise _refuse(f"{SKILL_FILE} is not UTF-8 text") from None
        files = [
            BundledFile(path=path, content=contents[name], content_type=guess_content_type(path))
            for name, path in sorted(paths.items(), key=lambda item: item[1])
        ]
        return SkillBundle(skill_md=text, files=files, folder=folder)

    def _entries(self, zipped: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
        infos = zipped.infolist()
        if len(infos) > self._max_entries:
            raise _refuse(f"has more than {self._max_entries} entries")
        entries: list[zipfile.ZipInfo] = []
        names: set[str] = set()
        declared = 0
        for info in infos:
            name = info.filename
            if "\x00" in info.orig_filename:
                raise _refuse(f"entry {name!r} has a NUL character in its name")
            if stat.S_ISLNK(info.external_attr >> 16):
                raise _refuse(f"entry {name!r} is a symbolic link")
            if info.is_dir() or _is_macos_junk(name):
                continue
            if info.flag_bits & _ENCRYPTED:
                raise _refuse(f"entry {name!r} is encrypted")
            if name in names:
                raise _refuse(f"entry {name!r} appears more than once")
            if info.compress_type not in _BOUNDED_METHODS:
                raise _refuse(f"entry {name!r} is compressed with a method other than deflate")
            if info.file_size > self._max_entry_bytes:
                raise self._entry_too_large(name)
            declared += info.file_size
            if declared > self._max_total_bytes:
                raise self._total_too_large()
            names.add(name)
            entries.append(info)
        return entries

    def _contents(
        self, zipped: zipfile.ZipFile, entries: list[zipfile.ZipInfo]
    ) -> dict[str, bytes]:
        contents: dict[str, bytes] = {}
        total = 0
        for info in entries:
            data = self._decompress(zipped, info)
            total += len(data)
            if total > self._max_total_bytes:
                raise self._total_too_large()
            contents[info.filename] = data
        return contents

    def _decompress(self, zipped: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
        buffer = bytearray()
        try:
            with zipped.open(info) as stream:
                while chunk := stream.read(_CHUNK):
                    buffer += chunk
                    if len(buffer) > self._max_entry_bytes:
                        raise self._entry_too_large(info.filename)
        except (
            zipfile.BadZipFile,
            zlib.error,
            lzma.LZMAError,
            OSError,
            EOFError,
            NotImplementedError,
        ):
            raise _refuse(
                f"entry {info.filename!r} is damaged or uses an unsupported compression method"
            ) from None
        return bytes(buffer)

    def _entry_too_large(self, name: str) -> Invalid:
        return _refuse(f"entry {name!r} is larger than {_size(self._max_entry_bytes)}")

    def _total_too_large(self) -> Invalid:
        return _refuse(f"holds more than {_size(self._max_total_bytes)} once decompressed")


def _folder(entries: list[zipfile.ZipInfo]) -> str | None:
    """None when SKILL.md sits at the root; the single top-level folder holding every entry
    and SKILL.md otherwise; `Invalid` when there is neither."""
    names = {info.filename for info in entries}
    if SKILL_FILE in names:
        return None
    tops = {name.split("/", 1)[0] for name in names}
    if len(tops) == 1 and all("/" in name for name in names):
        (folder,) = tops
        if f"{folder}/{SKILL_FILE}" in names:
            _check_path(folder, f"{folder}/")
            return folder
    raise _refuse(f"has no {SKILL_FILE} at its root or in its single top-level folder")


def _relative_paths(entries: list[zipfile.ZipInfo], folder: str | None) -> dict[str, str]:
    """Each bundled entry's name and its path relative to the skill (SKILL.md left out);
    `Invalid` for a path breaking the rules or a file that another file's path goes through."""
    prefix = "" if folder is None else f"{folder}/"
    paths: dict[str, str] = {}
    for info in entries:
        path = info.filename.removeprefix(prefix)
        if path != SKILL_FILE:
            paths[info.filename] = _check_path(path, info.filename)
    folders: set[str] = set()
    for path in paths.values():
        segments = path.split("/")
        folders.update("/".join(segments[:end]) for end in range(1, len(segments)))
    for path in [SKILL_FILE, *paths.values()]:
        if path in folders:
            raise _refuse(f"entry {path!r} is both a file and a folder")
    return paths


def _check_path(path: str, entry: str) -> str:
    try:
        return check_skill_path(path)
    except Invalid as error:
        rule = error.details[0]["message"] if error.details else "is not allowed"
        raise _refuse(f"entry {entry!r}: path {rule}") from None
