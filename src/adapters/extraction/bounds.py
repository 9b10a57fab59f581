"""Helpers shared by the readers that bound what a file grows to."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

_MEBIBYTE = 1024 * 1024


def megabytes(size: int) -> str:
    """`size` bytes for a message to a file's owner, such as "64 MB"."""
    if size % _MEBIBYTE == 0:
        return f"{size // _MEBIBYTE:,} MB"
    return f"{size / _MEBIBYTE:,.1f} MB"


def release_freed_memory() -> None:
    """Hand memory that parsers freed back to the system, where the C library allows it.

    glibc keeps freed blocks in the arena of the thread that freed them, so a worker thread
    that parsed a large file would otherwise hold on to its peak for as long as it lives.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        function = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS)
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int
    return function
