"""Rerankers (`application.ports.reranker.Reranker`): a `/rerank` endpoint over HTTP (`http`:
Cohere, Jina, vLLM, llama.cpp's server, Text Embeddings Inference) or a cross-encoder folder
run on this machine (`cross_encoder`). `make_reranker` builds the one the deployment names;
`reranker_problem` checks that name at start without loading anything (no torch import).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from adapters.rerank.cross_encoder import LocalCrossEncoderReranker, cross_encoder_problem
from adapters.rerank.http import HttpReranker, url_problem
from application.ports.reranker import Reranker, RerankFailed

__all__ = [
    "HttpReranker",
    "LocalCrossEncoderReranker",
    "ManagedReranker",
    "RerankFailed",
    "is_http_model",
    "make_reranker",
    "reranker_problem",
]


class ManagedReranker(Reranker, Protocol):
    """A `Reranker` with the service's start and stop: `warm_up` loads what it needs now
    (`RerankFailed` says why it cannot), `aclose` frees what it holds."""

    async def warm_up(self) -> None:
        """Load the model now rather than on the first `rerank`."""
        ...

    async def aclose(self) -> None:
        """Free the reranker's resources (its HTTP connections)."""
        ...


def is_http_model(model: str) -> bool:
    """Whether `model` names an endpoint (http:// or https://) rather than a local folder."""
    return model.strip().lower().startswith(("http://", "https://"))


def reranker_problem(
    model: str, *, api_key: str | None = None, name: str | None = None
) -> str | None:
    """What is wrong with reranking by `model` (a full `/rerank` URL, or the path of a
    cross-encoder folder) with `api_key` and the model `name` sent to an endpoint, or None.
    The message names the value, never the key; reads at most a few small files."""
    value = model.strip()
    if not value:
        return "names no URL or folder"
    if is_http_model(value):
        problem = url_problem(value)
        return None if problem is None else f"the URL {problem}"
    if api_key or name:
        return "an API key or a model name applies to an http(s) reranker, not a local folder"
    return cross_encoder_problem(Path(value).expanduser())


def make_reranker(
    model: str,
    *,
    api_key: str | None,
    name: str | None,
    timeout: float,
    batch_size: int,
    torch_threads: int | None = None,
) -> ManagedReranker:
    """The reranker `model` names: an `HttpReranker` for an http(s) URL (given in full, up to
    its `/rerank` path), else a `LocalCrossEncoderReranker` for the folder at that path.

    `api_key` (a bearer token) and `name` (sent as `model`) apply to an endpoint only;
    `timeout` bounds each `rerank` (seconds), `batch_size` the passages per request or forward
    pass, `torch_threads` torch's thread count for a local model. Raises `ValueError` with
    `reranker_problem`'s message when the configuration cannot work. Nothing is loaded or sent
    yet: the service calls `warm_up()` at start and `aclose()` at its end.
    """
    problem = reranker_problem(model, api_key=api_key, name=name)
    if problem is not None:
        raise ValueError(problem)
    value = model.strip()
    if is_http_model(value):
        return HttpReranker(
            value, api_key=api_key, model=name, timeout=timeout, batch_size=batch_size
        )
    return LocalCrossEncoderReranker(
        Path(value).expanduser(),
        timeout=timeout,
        batch_size=batch_size,
        torch_threads=torch_threads,
    )
