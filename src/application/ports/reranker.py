from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class RerankFailed(Exception):
    """The reranker gave no usable answer (unreachable, timed out, refused, or answered
    something that is not one score per passage); `message` says which, without secrets."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Reranker(Protocol):
    """Scores passages against a query with a model that reads both together (a cross-encoder),
    which orders a search's candidates better than the vector and full-text rankings it fuses.

    `rerank` returns one relevance score per passage, in the passages' order (higher is more
    relevant; scores compare within one call only). It never blocks the event loop, bounds its
    own time, and raises `RerankFailed` for any failure: the search then keeps its fused order.
    """

    @property
    def name(self) -> str:
        """What the deployment configured (`AP_RERANK_MODEL`), for logs and the search's header."""
        ...

    async def rerank(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score per passage, in order."""
        ...
