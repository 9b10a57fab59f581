"""The search's settings (`AP_SEARCH_*`, `AP_RERANK_*`), read with the others by
`Settings.from_env` and kept as `Settings.search`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from entrypoints.env_reader import EnvReader

DEFAULT_RERANK_TIMEOUT = 10.0
DEFAULT_RERANK_CANDIDATES = 30
DEFAULT_RERANK_BATCH_SIZE = 32


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """How `POST /kb/search` (and the agents' knowledge search) ranks.

    - `vector_weight`, `text_weight`, `rrf_k`: the reciprocal rank fusion, each ranking adding
      weight / (rrf_k + rank);
    - `bm25_k1`, `bm25_b`: BM25's parameters (the defaults of Anserini, the reference toolkit);
    - `feedback`: the second round (Rocchio and RM3) from the first fusion's best passages;
    - `diversify`: each file's best passage before any file's second;
    - `preload`: `serve` loads the local embedding model (and a local reranker) as it starts;
    - `rerank_model`: a `/rerank` URL or a cross-encoder folder (None: no reranking), with
      `rerank_api_key`, `rerank_name` (the `model` sent), `rerank_timeout` (seconds),
      `rerank_candidates` (how many fused passages it orders) and `rerank_batch_size`.
    """

    vector_weight: float = 1.0
    text_weight: float = 1.0
    rrf_k: int = 60
    bm25_k1: float = 0.9
    bm25_b: float = 0.4
    feedback: bool = True
    diversify: bool = True
    preload: bool = True
    rerank_model: str | None = None
    rerank_api_key: str | None = field(default=None, repr=False)
    rerank_name: str | None = None
    rerank_timeout: float = DEFAULT_RERANK_TIMEOUT
    rerank_candidates: int = DEFAULT_RERANK_CANDIDATES
    rerank_batch_size: int = DEFAULT_RERANK_BATCH_SIZE

    @classmethod
    def from_env(cls, environ: Mapping[str, str], problems: list[str]) -> SearchSettings:
        """The settings in `environ`; each invalid one adds to `problems` and keeps its
        default."""
        env = EnvReader(environ, problems)
        settings = cls(
            vector_weight=env.number("AP_SEARCH_VECTOR_WEIGHT", 1.0, 0.0, 100.0),
            text_weight=env.number("AP_SEARCH_TEXT_WEIGHT", 1.0, 0.0, 100.0),
            rrf_k=env.integer("AP_SEARCH_RRF_K", 60, 1, 10_000),
            bm25_k1=env.number("AP_SEARCH_BM25_K1", 0.9, 0.0, 10.0),
            bm25_b=env.number("AP_SEARCH_BM25_B", 0.4, 0.0, 1.0),
            feedback=env.flag("AP_SEARCH_FEEDBACK", True),
            diversify=env.flag("AP_SEARCH_DIVERSIFY", True),
            preload=env.flag("AP_SEARCH_PRELOAD", True),
            rerank_model=env.text("AP_RERANK_MODEL"),
            rerank_api_key=env.text("AP_RERANK_API_KEY"),
            rerank_name=env.text("AP_RERANK_NAME"),
            rerank_timeout=env.number("AP_RERANK_TIMEOUT", DEFAULT_RERANK_TIMEOUT, 0.1, 600.0),
            rerank_candidates=env.integer(
                "AP_RERANK_CANDIDATES", DEFAULT_RERANK_CANDIDATES, 1, 200
            ),
            rerank_batch_size=env.integer(
                "AP_RERANK_BATCH_SIZE", DEFAULT_RERANK_BATCH_SIZE, 1, 1024
            ),
        )
        if settings.vector_weight == 0 and settings.text_weight == 0:
            problems.append("AP_SEARCH_VECTOR_WEIGHT and AP_SEARCH_TEXT_WEIGHT cannot both be 0")
        if settings.rerank_model is not None:
            from adapters.rerank import reranker_problem

            problem = reranker_problem(
                settings.rerank_model, api_key=settings.rerank_api_key, name=settings.rerank_name
            )
            if problem is not None:
                problems.append(f"AP_RERANK_MODEL: {problem}")
        elif settings.rerank_api_key or settings.rerank_name:
            problems.append("AP_RERANK_API_KEY and AP_RERANK_NAME need AP_RERANK_MODEL")
        return settings
