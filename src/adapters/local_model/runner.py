"""The local-model runner: a child process that loads the bundled model once and answers its
parent's requests over its standard input and output (`adapters.local_model.protocol`).

It exists so that native code (llama.cpp) that crashes, hangs or runs out of memory takes
down this process only: the parent (`adapters.local_model.runner_client`) fails the answer in
progress and starts a new runner. One request runs at a time; a `Cancel` stops it at the next token.
The runner exits as soon as its input closes, so it never outlives its parent.

    python -m adapters.local_model.runner --threads 2 --n-ctx 4096 [--memory-limit BYTES]
"""

from __future__ import annotations

import argparse
import faulthandler
import functools
import os
import queue
import sys
import threading
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from adapters.local_model.protocol import (
    HEADER,
    MAX_FRAME,
    Cancel,
    Delta,
    Done,
    Failed,
    FromRunner,
    Generate,
    Ready,
    frame,
    to_runner,
)

if TYPE_CHECKING:
    from adapters.local_model.engine import LlamaEngine

FAILED = "The local model failed to answer."
EXIT_UNSUPPORTED_CPU = 3
EXIT_LOAD_FAILED = 4


class _Output:
    """Frames to the parent on the protocol's file descriptor."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def send(self, message: FromRunner) -> None:
        data = memoryview(frame(message))
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        except BrokenPipeError:
            # The parent is gone: nobody is listening any more.
            os._exit(0)


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks: list[bytes] = []
    while size:
        chunk = os.read(fd, size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _read_requests(fd: int, requests: queue.SimpleQueue[Generate], cancelled: set[int]) -> None:
    while True:
        header = _read_exactly(fd, HEADER.size)
        if header is None:
            # The parent closed our input (it stops us, or it died): stop now, mid-answer too.
            os._exit(0)
        (size,) = HEADER.unpack(header)
        body = _read_exactly(fd, size) if size <= MAX_FRAME else None
        if body is None:
            os._exit(0)
        message = to_runner.decode(body)
        if isinstance(message, Cancel):
            cancelled.add(message.id)
        else:
            requests.put(message)


def _emit(output: _Output, request_id: int, text: str) -> None:
    output.send(Delta(request_id, text))


def _serve(
    engine: LlamaEngine, output: _Output, input_fd: int, requests: queue.SimpleQueue[Generate]
) -> None:
    from adapters.local_model.engine import EngineError

    cancelled: set[int] = set()
    threading.Thread(
        target=_read_requests, args=(input_fd, requests, cancelled), daemon=True
    ).start()
    while True:
        request = requests.get()
        request_id = request.id
        try:
            reason, input_tokens, output_tokens = engine.generate(
                [{"role": t.role, "content": t.content} for t in request.turns],
                max_tokens=request.max_tokens,
                temperature=request.temperature,
                json_schema=request.json_schema,
                emit=functools.partial(_emit, output, request_id),
                stopped=functools.partial(cancelled.__contains__, request_id),
            )
            output.send(Done(request_id, reason, input_tokens, output_tokens))
        except EngineError as failure:
            output.send(Failed(request_id, failure.message))
        except Exception:
            traceback.print_exc()
            output.send(Failed(request_id, FAILED))
        finally:
            cancelled.discard(request_id)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="adapters.local_model.runner")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--memory-limit", type=int, default=0, help="bytes of address space")
    args = parser.parse_args(argv)
    faulthandler.enable()
    # The protocol keeps the original standard input and output; whatever native code prints
    # goes to standard error instead of into a frame.
    input_fd = os.dup(0)
    output = _Output(os.dup(1))
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    if args.memory_limit > 0:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (args.memory_limit, args.memory_limit))

    from adapters.local_model.cpu_features import unsupported_features

    missing = unsupported_features()
    if missing:
        print(
            "llama-cpp-python was built for instructions this CPU lacks "
            f"({', '.join(missing)}); reinstall it with scripts/install-llama-cpp.sh",
            file=sys.stderr,
        )
        return EXIT_UNSUPPORTED_CPU
    from adapters.local_model.engine import LlamaEngine

    try:
        engine = LlamaEngine(threads=args.threads, n_ctx=args.n_ctx)
    except Exception:
        traceback.print_exc()
        return EXIT_LOAD_FAILED
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    output.send(Ready(pid=os.getpid(), n_ctx=engine.n_ctx, system_info=info))
    _serve(engine, output, input_fd, queue.SimpleQueue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
