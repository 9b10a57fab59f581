"""Reranking with a cross-encoder on this machine's CPU: a sentence-transformers `CrossEncoder`
loaded from a folder the operator supplies (no package ships reranker weights).

Nothing is ever downloaded: the folder must exist and hold the whole model, it is loaded with
`local_files_only=True` under the Hugging Face offline switches, and code shipped in it is
never run (`trust_remote_code=False`). `cross_encoder_problem` tells from a few small files,
without torch, whether a folder can be one: a missing path, a file, a folder without a model or
one holding an embedding model are refused at start with a message saying which.

The model loads once per process, on `warm_up` (which the service calls at start) or on the
first `rerank`; loading and scoring run on one dedicated thread, apart from the local
embedder's, so that the event loop stays free and a search's rerank does not queue behind a
document's embedding. A call is bounded by `timeout`, its wait for the thread included; one that
times out or is cancelled stops between batches of passages. Scores are the model's own (after
its configured activation: a sigmoid for a one-label model, so 0 to 1).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from application.ports.reranker import RerankFailed

WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
MAX_LOAD_MESSAGE = 300

_models: dict[str, Any] = {}
# Why a folder could not be loaded: a search is not made to pay for the same failure again.
_failures: dict[str, str] = {}
_models_lock = threading.Lock()
# One thread for all local reranking: torch already spreads a batch over the cores it may use.
_rerank_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="local-reranker")


def cross_encoder_problem(path: Path) -> str | None:
    """Why the folder at `path` cannot be loaded as a cross-encoder, or None.

    It must be a folder holding either a sentence-transformers CrossEncoder (`modules.json`,
    with `model_type` "CrossEncoder" in `config_sentence_transformers.json`) or a Hugging Face
    model whose `config.json` names a `...ForSequenceClassification` architecture with one
    label (or a `...ForCausalLM` one, which sentence-transformers scores by its yes/no
    logits), beside its weights. Reads only those small files, so configuration checks can
    call it at start; whatever else is wrong shows when the model loads.
    """
    if not path.exists():
        return f"{path} does not exist"
    if not path.is_dir():
        return f"{path} is not a folder"
    if (path / "modules.json").is_file():
        settings = _json_object(path / "config_sentence_transformers.json") or {}
        kind = settings.get("model_type", "SentenceTransformer")
        if kind != "CrossEncoder":
            return (
                f"{path} holds a sentence-transformers {kind} (an embedding model), "
                "not a cross-encoder"
            )
        return None
    if not (path / "config.json").is_file():
        return f"{path} has no config.json: it holds no Hugging Face model"
    config = _json_object(path / "config.json")
    if config is None:
        return f"{path}/config.json is not a JSON object"
    declared = config.get("architectures")
    listed = declared if isinstance(declared, list) else []
    architectures = [name for name in listed if isinstance(name, str)]
    if any(name.endswith("ForSequenceClassification") for name in architectures):
        labels = _label_count(config)
        if labels != 1:
            return f"{path} holds a classifier with {labels} labels; a reranker gives one score"
    elif not any(name.endswith("ForCausalLM") for name in architectures):
        held = ", ".join(architectures) or "a model of no declared architecture"
        return f"{path} holds {held}, not a cross-encoder (a ...ForSequenceClassification model)"
    if not any((path / name).is_file() for name in WEIGHT_FILES):
        return f"{path} has no model weights (model.safetensors or pytorch_model.bin)"
    return None


def _json_object(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _label_count(config: dict[str, Any]) -> int:
    labels = config.get("id2label")
    if isinstance(labels, dict):
        return len(labels)
    count = config.get("num_labels")
    # transformers' own default when a config names no labels.
    return count if isinstance(count, int) else 2


def load_cross_encoder(path: Path) -> Any:
    """The cross-encoder at `path` on the CPU, loaded on the first call and shared afterwards;
    `RerankFailed` saying why when it cannot be loaded or gives more than one score per passage
    (remembered: later calls fail alike without trying again, until the process restarts)."""
    key = str(path)
    with _models_lock:
        model = _models.get(key)
        if model is not None:
            return model
        failure = _failures.get(key)
        if failure is not None:
            raise RerankFailed(failure)
        try:
            model = _load(path)
        except RerankFailed as exc:
            _failures[key] = exc.message
            raise
        _models[key] = model
        return model


def _load(path: Path) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from sentence_transformers import CrossEncoder
        from transformers.utils import logging as transformers_logging
    except ImportError as exc:
        raise RerankFailed(
            "Local reranking needs the sentence-transformers and torch packages "
            "(install agent-platform[local])"
        ) from exc
    # Progress bars would be written into the service's structured log stream.
    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    problem = cross_encoder_problem(path)
    if problem is not None:
        raise RerankFailed(f"The reranker model cannot be loaded: {problem}")
    try:
        model = CrossEncoder(
            str(path), device="cpu", local_files_only=True, trust_remote_code=False
        )
    except Exception as exc:
        detail = " ".join(str(exc).split())[:MAX_LOAD_MESSAGE]
        raise RerankFailed(f"The reranker model at {path} could not be loaded: {detail}") from exc
    if model.num_labels != 1:
        raise RerankFailed(
            f"The reranker model at {path} gives {model.num_labels} scores per passage, "
            "a reranker one"
        )
    return model


class LocalCrossEncoderReranker:
    """`Reranker` over the cross-encoder in the folder at `path`.

    The constructor checks the folder (`cross_encoder_problem`) and raises `ValueError` naming
    what is wrong; the model itself loads on `warm_up` or on the first `rerank`. `timeout`
    bounds a `rerank` in seconds, `batch_size` the pairs scored in one forward pass, and
    `torch_threads`, when given, torch's process-wide thread count (set the same as the local
    embedder's, or the two would keep changing it).
    """

    def __init__(
        self,
        path: Path | str,
        *,
        timeout: float = 30.0,
        batch_size: int = 32,
        torch_threads: int | None = None,
    ) -> None:
        self._path = Path(path).expanduser()
        problem = cross_encoder_problem(self._path)
        if problem is not None:
            raise ValueError(problem)
        if not timeout > 0:
            raise ValueError("timeout must be positive")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if torch_threads is not None and torch_threads < 1:
            raise ValueError("torch_threads must be at least 1")
        self._timeout = timeout
        self._batch_size = batch_size
        self._torch_threads = torch_threads

    @property
    def name(self) -> str:
        """The model's folder."""
        return str(self._path)

    def _model(self) -> Any:
        model = load_cross_encoder(self._path)
        if self._torch_threads is not None:
            import torch

            if torch.get_num_threads() != self._torch_threads:
                torch.set_num_threads(self._torch_threads)
        return model

    async def warm_up(self) -> None:
        """Load the model now rather than on the first `rerank` (no time limit: a large model
        takes a while); `RerankFailed` says why it cannot be loaded, naming the folder, for the
        operator's log. Loading twice is free."""
        await asyncio.get_running_loop().run_in_executor(_rerank_thread, self._model)

    async def aclose(self) -> None:
        """Nothing to close: the loaded model is shared by the process and lives as long."""

    def score_now(self, query: str, passages: list[str], abandoned: threading.Event) -> list[float]:
        """Scores for `passages`, computed in the calling thread (the reranking thread), batch
        by batch until done or until `abandoned` is set (the caller is gone). A model that
        cannot be loaded fails without its folder or the loader's words, which a search's
        caller may be shown: `warm_up` tells the operator those."""
        try:
            model = self._model()
        except RerankFailed as failure:
            raise RerankFailed("The local reranker model could not be loaded") from failure
        scores: list[float] = []
        for start in range(0, len(passages), self._batch_size):
            if abandoned.is_set():
                break
            batch = passages[start : start + self._batch_size]
            try:
                raw = model.predict(
                    [(query, passage) for passage in batch],
                    batch_size=self._batch_size,
                    show_progress_bar=False,
                    convert_to_numpy=True,
                )
            except Exception as exc:
                # Only the error's kind: its message may quote the text it choked on.
                raise RerankFailed(f"The local reranker failed ({type(exc).__name__})") from exc
            scores.extend(_flat_scores(raw, len(batch)))
        return scores

    async def rerank(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score per passage, in order; raises `RerankFailed` for any failure, or when the
        call (its wait for the reranking thread included) takes longer than `timeout`."""
        texts = list(passages)
        if not isinstance(query, str) or not all(isinstance(text, str) for text in texts):
            raise TypeError("the query and the passages must be strings")
        if not texts:
            return []
        abandoned = threading.Event()
        work = asyncio.get_running_loop().run_in_executor(
            _rerank_thread, self.score_now, query, texts, abandoned
        )
        try:
            return await asyncio.wait_for(work, self._timeout)
        except TimeoutError:
            raise RerankFailed(
                f"The local reranker did not finish within {self._timeout:g} s"
            ) from None
        finally:
            abandoned.set()


def _flat_scores(raw: Any, count: int) -> list[float]:
    shape = tuple(getattr(raw, "shape", ()))
    if shape not in ((count,), (count, 1)):
        raise RerankFailed(f"The local reranker gave scores of shape {shape} for {count} passages")
    scores = [float(value) for value in raw.reshape(count).tolist()]
    if not all(math.isfinite(score) for score in scores):
        raise RerankFailed("The local reranker gave a score that is not a finite number")
    return scores
