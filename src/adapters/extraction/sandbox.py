"""`TextExtractor` that runs another one in a child process, one file at a time per child.

Parsers of hostile files are where native code (PDFium; ONNX Runtime and OpenCV, which read
scans by OCR) crashes, loops or swells: here that costs the child, never the worker. A child
whose resident memory passes `memory_limit` while it extracts is killed and the file fails for
good ("needs more memory than allowed"); one that takes longer than `timeout` is killed and the
file fails too; one that dies by itself (a crash, `abort()`) raises `ExtractorCrashed`, which
the queue retries like any transient error until the file's last attempt. Children are reused
from file to file (the OCR models load once in each) and replaced after `max_files`, or once
they hold more than half of `memory_limit` after a file (memory a parser keeps is given back
by ending its process).

The child is this module run as a program (`python -m adapters.extraction.sandbox TARGET`);
TARGET (`module:attribute`) names a factory of the `TextExtractor` it runs. The two speak
pickled frames over the child's standard input and output: both sides are this code.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from adapters.child_processes import describe_exit, resident_bytes
from application.ports.text_extractor import ExtractorCrashed, TextExtractor
from domain.extraction import ExtractedDocument, ExtractionFailed, ExtractionLimits

DEFAULT_TARGET = "adapters.extraction.extractor:extractor_with_ocr"
HEADER = struct.Struct(">Q")
POLL_SECONDS = 0.1
# A reply is a document and its page images; nothing legitimate comes near this.
MAX_FRAME = 4 * 2**30


def needs_more_memory(limit: int) -> str:
    return (
        "This file needs more memory than allowed to extract "
        f"(over {limit // 2**20} MB): split it into smaller files."
    )


def too_slow(seconds: float) -> str:
    return f"This file took longer than {round(seconds)} seconds to extract."


def _write_frame(stream: IO[bytes], payload: object) -> None:
    body = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(body)) + body)
    stream.flush()


def _read_exactly(stream: IO[bytes], size: int) -> bytes | None:
    chunks: list[bytes] = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _read_frame(stream: IO[bytes]) -> Any:
    header = _read_exactly(stream, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    if size > MAX_FRAME:
        return None
    body = _read_exactly(stream, size)
    # Trusted: the frame comes from this module's own child.
    return None if body is None else pickle.loads(body)  # noqa: S301


class _Child:
    def __init__(self, target: str) -> None:
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "adapters.extraction.sandbox", target, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
            start_new_session=True,
        )
        self.files = 0

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()

    def close(self) -> None:
        if self.alive:
            assert self.process.stdin is not None
            with contextlib.suppress(OSError):
                self.process.stdin.close()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()


class SandboxedTextExtractor:
    """Runs the `TextExtractor` made by `target` in child processes (see the module)."""

    def __init__(
        self,
        *,
        memory_limit: int,
        timeout: float = 600.0,
        max_files: int = 200,
        target: str = DEFAULT_TARGET,
        on_event: Callable[..., None] | None = None,
    ) -> None:
        self._memory_limit = memory_limit
        self._timeout = timeout
        self._max_files = max_files
        self._target = target
        self._idle: list[_Child] = []
        self._busy: set[_Child] = set()
        self._lock = threading.Lock()
        self._log = on_event or (lambda *_args, **_kwargs: None)

    def extract(
        self, data: bytes, *, content_type: str, file_name: str, limits: ExtractionLimits
    ) -> ExtractedDocument:
        child = self._take()
        try:
            kind, value = self._run(child, (data, content_type, file_name, limits))
        except BaseException:
            with self._lock:
                self._busy.discard(child)
            child.kill()
            raise
        self._give_back(child)
        if kind == "ok":
            assert isinstance(value, ExtractedDocument)
            return value
        if kind == "failed":
            raise ExtractionFailed(str(value))
        raise RuntimeError(f"the extractor raised {value}")

    def close(self) -> None:
        """End the children: the idle ones, and those at work (their files fail)."""
        with self._lock:
            idle, self._idle = self._idle, []
            busy = list(self._busy)
        for child in idle:
            child.close()
        for child in busy:
            child.kill()

    def _take(self) -> _Child:
        with self._lock:
            while self._idle:
                child = self._idle.pop()
                if child.alive:
                    self._busy.add(child)
                    return child
        child = _Child(self._target)
        with self._lock:
            self._busy.add(child)
        return child

    def _give_back(self, child: _Child) -> None:
        with self._lock:
            self._busy.discard(child)
        child.files += 1
        resident = resident_bytes(child.process.pid) or 0
        if (
            child.files >= self._max_files
            or (self._memory_limit and resident > self._memory_limit // 2)
            or not child.alive
        ):
            self._log("extraction.child_recycled", files=child.files, resident=resident)
            child.close()
            return
        with self._lock:
            self._idle.append(child)

    def _run(self, child: _Child, request: tuple[Any, ...]) -> tuple[str, Any]:
        """The child's reply to `request`: `ok` and the document, `failed` and the message for
        the file's owner, or `error` and the name of what the extractor raised."""
        process = child.process
        assert process.stdin is not None and process.stdout is not None
        try:
            _write_frame(process.stdin, request)
        except (BrokenPipeError, OSError):
            raise self._crashed(child) from None
        deadline = time.monotonic() + self._timeout
        poller = select.poll()
        poller.register(process.stdout, select.POLLIN | select.POLLHUP)
        while True:
            if poller.poll(POLL_SECONDS * 1000):
                break
            if process.poll() is not None:
                raise self._crashed(child)
            resident = resident_bytes(process.pid)
            if self._memory_limit and resident is not None and resident > self._memory_limit:
                self._log("extraction.memory_exceeded", resident=resident)
                child.kill()
                raise ExtractionFailed(needs_more_memory(self._memory_limit))
            if time.monotonic() > deadline:
                self._log("extraction.timed_out", seconds=self._timeout)
                child.kill()
                raise ExtractionFailed(too_slow(self._timeout))
        reply = _read_frame(process.stdout)
        if reply is None:
            raise self._crashed(child)
        kind, value = reply
        return str(kind), value

    def _crashed(self, child: _Child) -> ExtractorCrashed:
        child.kill()
        how = describe_exit(child.process.returncode)
        self._log("extraction.child_crashed", exit=how)
        return ExtractorCrashed(f"The text extractor crashed on this file ({how}).")


def _die_with_parent(parent: int) -> None:
    """Have the kernel kill this process when its parent (the worker, `parent`) dies, even
    while a parser runs: a child only reads its input between files. A parent that died
    before this ran (while the parsers were being imported) ends the child at once."""
    if sys.platform == "linux":
        import ctypes
        import signal

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


def _child_main(target: str, parent: int) -> int:
    import faulthandler

    _die_with_parent(parent)
    faulthandler.enable()
    # The frames keep the original standard input and output; whatever a parser (native code
    # included) prints goes to standard error instead of into a frame.
    stdin = os.fdopen(os.dup(0), "rb")
    stdout = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    module_name, _, attribute = target.partition(":")
    factory = getattr(importlib.import_module(module_name), attribute)
    extractor: TextExtractor = factory()
    while True:
        request = _read_frame(stdin)
        if request is None:
            return 0
        data, content_type, file_name, limits = request
        try:
            document = extractor.extract(
                data, content_type=content_type, file_name=file_name, limits=limits
            )
            reply: tuple[str, Any] = ("ok", document)
        except ExtractionFailed as failure:
            reply = ("failed", failure.message)
        except Exception as error:
            reply = ("error", type(error).__name__)
        del data, request
        _write_frame(stdout, reply)


if __name__ == "__main__":
    sys.exit(
        _child_main(
            sys.argv[1] if len(sys.argv) > 1 else DEFAULT_TARGET,
            int(sys.argv[2]) if len(sys.argv) > 2 else os.getppid(),
        )
    )
