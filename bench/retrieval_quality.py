"""Search quality of `POST /kb/search` on the Cranfield collection, against in-process baselines.

    .venv/bin/python bench/retrieval_quality.py [--queries N] [--rerank-model PATH_OR_URL]

The service: `agent-platform serve` on the embedded defaults (its worker child included, the
bundled all-MiniLM-L6-v2) on a temporary data dir. One knowledge base; each of Cranfield's 1,400
documents (`../shared/data/cranfield` from the repository root, `--data`) uploaded as its own text
file over the HTTP API as a client does (presign, PUT, associate), its content the title, a
blank line and the text, its name `cranfield-NNNN.txt`; then until every file is `completed` (a
failed one stops the run). Documents 471 and 995 have no title and no text: the service refuses
an empty file (`parse_failed`), so they are left out of every system (995 stays judged: query
125's ideal DCG counts it). serve is then restarted on the same data dir and the first search
after its start is timed alone (a model loaded lazily would show there). Then the 225 queries
(the n-th of cran.qry is query n of cranqrel) through `POST /kb/search` with topK 50, sequential
on one kept-alive connection: one warm-up pass, then one timed pass whose answers are scored. A
document's rank is the first place any of its passages takes; further passages of it count once.
With `--rerank-model`, serve starts with `AP_RERANK_MODEL` set to it and every query runs with
`"rerank": false` and `"rerank": true` on that serve, alternating which goes first.

The baselines, in this process over the same title + text documents, after serve has stopped:

- BM25: rank_bm25's `BM25Okapi` with k1 0.9, b 0.4 over lower-cased word tokens of two or more
  characters (scikit-learn's default token pattern) less scikit-learn's English stop words
  (`ENGLISH_STOP_WORDS`, 318 words, copied below);
- dense only: all-MiniLM-L6-v2 (sentence-transformers, the bundled folder the service loads),
  one vector per whole document (the model reads its first 256 word pieces), cosine;
- RRF: reciprocal rank fusion (k 60) of those two full rankings (BM25's: the documents that share
  a term with the query);
- LlamaIndex: llama-index-core's `QueryFusionRetriever` (num_queries 1, so no LLM; mode
  `reciprocal_rerank`; similarity_top_k 50) over llama-index-retrievers-bm25's `BM25Retriever`
  (its defaults: bm25s, English stemmer and stop words) and a `VectorStoreIndex` retriever with
  the same MiniLM vectors (a `BaseEmbedding` over sentence-transformers), one node per document.

Metrics per system, averaged over the queries: nDCG@10 (gain 5 - code for codes 1-4, else 0; log2
discount; the ideal DCG from every judged relevant document of the query), Recall@10 and
Recall@50 (relevant: codes 1-4), MRR@10. The service against each baseline, query by query on
nDCG@10: the mean difference with a 95% paired bootstrap interval (10,000 resamples of the
queries, seed `--seed`, percentile interval) and wins/ties/losses. Targets: the service's
nDCG@10 at least 0.44 and above every baseline's, search p50 under 30 ms.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harness
import httpx
from harness import BenchError, Platform, Rig, expect, percentile, verdict

SECTION_TITLE = "Retrieval quality: /kb/search on Cranfield against BM25, dense and fusion"
DATA_DIR = harness.ROOT.parent / "shared" / "data" / "cranfield"
ORG_ID = "org_retrieval"
TOP_K = 50
RRF_K = 60
BM25_K1, BM25_B = 0.9, 0.4
NDCG_TARGET = 0.44
P50_TARGET_MS = 30.0
BOOTSTRAP = 10_000
UPLOAD_THREADS = 4
FAILED = {"parse_failed", "chunk_failed", "extract_failed"}
SERVICE, RERANKED = "service", "service + rerank"
BASELINES = ("BM25", "dense", "RRF", "LlamaIndex fusion")
BASELINE_LABELS = {
    "BM25": f"BM25 (rank_bm25 BM25Okapi, k1 {BM25_K1}, b {BM25_B})",
    "dense": "dense (all-MiniLM-L6-v2, whole document)",
    "RRF": f"RRF of BM25 + dense (k {RRF_K})",
    "LlamaIndex fusion": "LlamaIndex QueryFusionRetriever (BM25Retriever + vector)",
}

# scikit-learn's `sklearn.feature_extraction.text.ENGLISH_STOP_WORDS` (318 words), copied.
_STOP_WORDS = """
a about above across after afterwards again against all almost alone along already also
although always am among amongst amoungst amount an and another any anyhow anyone anything
anyway anywhere are around as at back be became because become becomes becoming been before
beforehand behind being below beside besides between beyond bill both bottom but by call can
cannot cant co con could couldnt cry de describe detail do done down due during each eg
eight either eleven else elsewhere empty enough etc even ever every everyone everything
everywhere except few fifteen fifty fill find fire first five for former formerly forty
found four from front full further get give go had has hasnt have he hence her here
hereafter hereby herein hereupon hers herself him himself his how however hundred i ie if in
inc indeed interest into is it its itself keep last latter latterly least less ltd made many
may me meanwhile might mill mine more moreover most mostly move much must my myself name
namely neither never nevertheless next nine no nobody none noone nor not nothing now nowhere
of off often on once one only onto or other others otherwise our ours ourselves out over own
part per perhaps please put rather re same see seem seemed seeming seems serious several she
should show side since sincere six sixty so some somehow someone something sometime
sometimes somewhere still such system take ten than that the their them themselves then
thence there thereafter thereby therefore therein thereupon these they thick thin third this
those though three through throughout thru thus to together too top toward towards twelve
twenty two un under until up upon us very via was we well were what whatever when whence
whenever where whereafter whereas whereby wherein whereupon wherever whether which while
whither who whoever whole whom whose why will with within without would yet you your yours
yourself yourselves
"""
ENGLISH_STOP_WORDS = frozenset(_STOP_WORDS.split())
WORD = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's default token pattern


# the collection ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Doc:
    id: int
    title: str
    text: str

    @property
    def content(self) -> str:
        """The file's content: the title, a blank line, the text."""
        return f"{self.title}\n\n{self.text}"

    @property
    def file_name(self) -> str:
        return f"cranfield-{self.id:04d}.txt"


@dataclass(frozen=True)
class Query:
    number: int  # its place in cran.qry: the query's id in cranqrel
    text: str


@dataclass
class Collection:
    docs: list[Doc]  # those with text: the service refuses an empty file
    queries: list[Query]
    judged: dict[int, dict[int, int]]  # query -> document -> Cleverdon code
    empty: list[int]  # documents without title or text (471 and 995), in no system

    def gains(self, query: int) -> dict[int, int]:
        """Graded gains of the query's relevant documents: 5 - code for codes 1-4."""
        return {d: 5 - c for d, c in self.judged.get(query, {}).items() if 1 <= c <= 4}


def records(path: Path) -> list[dict[str, str]]:
    """The `.I` records of a Cranfield file, each field (`I`, `T`, `A`, `B`, `W`) as text."""
    out: list[dict[str, list[str]]] = []
    name = ""
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(".I"):
            out.append({"I": [line[2:].strip()]})
            name = ""
        elif out and re.fullmatch(r"\.[TABW]\s*", line):
            name = line[1]
            out[-1][name] = []
        elif out and name:
            out[-1][name].append(line)
    return [{k: "\n".join(v).strip() for k, v in r.items()} for r in out]


def load_collection(data: Path, queries: int | None) -> Collection:
    needed = [data / n for n in ("cran.all.1400", "cran.qry", "cranqrel")]
    missing = [str(p) for p in needed if not p.is_file()]
    if missing:
        raise BenchError(f"the Cranfield collection is missing: {', '.join(missing)} (--data)")
    docs = [
        Doc(int(r["I"]), " ".join(r.get("T", "").split()), r.get("W", ""))
        for r in records(needed[0])
    ]
    found = [
        Query(n, " ".join(r.get("W", "").split())) for n, r in enumerate(records(needed[1]), 1)
    ]
    judged: dict[int, dict[int, int]] = {}
    for line in needed[2].read_text().splitlines():
        if line.strip():
            q, d, code = (int(x) for x in line.split()[:3])
            judged.setdefault(q, {})[d] = code
    if len(docs) != 1400 or len(found) != 225 or len(judged) != 225:
        raise BenchError(
            f"unexpected Cranfield counts: {len(docs)} documents, {len(found)} queries, "
            f"{len(judged)} judged queries (expected 1,400, 225, 225)"
        )
    empty = [d.id for d in docs if not d.content.strip()]
    texts = [d for d in docs if d.content.strip()]
    return Collection(texts, found[:queries] if queries else found, judged, empty)


# metrics ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scores:
    ndcg10: float
    recall10: float
    recall50: float
    mrr10: float


METRICS = ("ndcg10", "recall10", "recall50", "mrr10")
METRIC_HEADS = ("nDCG@10", "Recall@10", "Recall@50", "MRR@10")


def score(ranking: Sequence[int], gains: dict[int, int]) -> Scores:
    """One query's figures for a ranking of distinct documents, best first."""
    dcg = sum(gains.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranking[:10]))
    ideal = sorted(gains.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    relevant = set(gains)
    first = next((i for i, d in enumerate(ranking[:10]) if d in relevant), None)

    def recall(k: int) -> float:
        return len(relevant & set(ranking[:k])) / len(relevant) if relevant else 0.0

    return Scores(
        ndcg10=dcg / idcg if idcg else 0.0,
        recall10=recall(10),
        recall50=recall(50),
        mrr10=1.0 / (first + 1) if first is not None else 0.0,
    )


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def wait_models_loaded(platform: harness.Platform, started: float, timeout: float = 300) -> float:
    """Seconds from `started` until serve's log says its search models are loaded (they load in
    the background as it starts; a search before then waits for them)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "search_models_loaded" in platform.process.log.read_text(errors="replace"):
            return time.perf_counter() - started
        time.sleep(0.1)
    raise harness.BenchError("serve never logged search_models_loaded")


def first_places(ids: Sequence[int]) -> list[int]:
    """Distinct ids in the order of their first place."""
    return list(dict.fromkeys(ids))


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    """Reciprocal rank fusion, ties by id."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(fused, key=lambda item: (-fused[item], item))


@dataclass(frozen=True)
class Paired:
    mean: float
    low: float
    high: float
    wins: int
    ties: int
    losses: int


def paired(a: Sequence[float], b: Sequence[float], seed: int) -> Paired:
    """a - b query by query: the mean, its 95% paired bootstrap percentile interval
    (`BOOTSTRAP` resamples of the queries), and the queries where a is above, equal, below."""
    import numpy as np

    diffs = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, len(diffs), size=(BOOTSTRAP, len(diffs)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return Paired(
        mean=float(diffs.mean()),
        low=float(low),
        high=float(high),
        wins=int((diffs > 1e-12).sum()),
        ties=int((abs(diffs) <= 1e-12).sum()),
        losses=int((diffs < -1e-12).sum()),
    )


# the service ------------------------------------------------------------------------------
@dataclass
class ServiceRun:
    defaults: dict[str, Any]
    files: int
    upload_s: float
    ingest_s: float
    restart_s: float
    loaded_s: float
    first_search_ms: float
    first_headers: dict[str, str]
    rankings: dict[str, list[list[int]]] = field(default_factory=dict)  # mode -> per query
    distinct: dict[str, list[int]] = field(default_factory=dict)  # documents among the passages
    passages: dict[str, list[int]] = field(default_factory=dict)  # passages answered
    latency: dict[str, list[float]] = field(default_factory=dict)  # ms, timed pass
    unstable: dict[str, int] = field(default_factory=dict)  # warm-up and timed pass differ
    rerank: dict[str, Counter[str]] = field(default_factory=dict)  # X-Rerank of the timed pass
    rerank_error: str = ""  # the first X-Rerank-Error seen
    settings: str = ""  # the service's search settings, when it exposes them
    load: str = ""  # the load average after the timed pass


def upload_all(platform: Platform, token: str, kb_id: int, docs: Sequence[Doc]) -> None:
    """Every document through presign, PUT and associate, `UPLOAD_THREADS` at a time (each
    thread its own client)."""
    local = threading.local()
    clients: list[httpx.Client] = []
    lock = threading.Lock()
    done = 0

    def one(doc: Doc) -> None:
        nonlocal done
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = httpx.Client(
                base_url=platform.url, headers=harness.bearer(token), timeout=60.0
            )
            with lock:
                clients.append(client)
        harness.upload_file(client, kb_id, doc.file_name, "text/plain", doc.content.encode())
        with lock:
            done += 1
            if done % 200 == 0 or done == len(docs):
                print(f"  uploaded {done}/{len(docs)}", flush=True)

    try:
        with ThreadPoolExecutor(UPLOAD_THREADS) as pool:
            list(pool.map(one, docs))
    finally:
        for client in clients:
            client.close()


def wait_completed(
    client: httpx.Client, kb_id: int, platform: Platform, expected: int, timeout: float
) -> None:
    """Until every file of the knowledge base is `completed`; a failed one is an error."""
    deadline = time.monotonic() + timeout
    last = -1
    while time.monotonic() < deadline:
        if platform.process.popen.poll() is not None:
            raise BenchError(f"serve exited while the files were processed:\n{platform.logs()}")
        files = expect(client.get("/kb/files", params={"kbId": kb_id}), 200)["files"]
        failed = [f for f in files if f["processingStatus"] in FAILED]
        if failed:
            listed = "; ".join(
                f"{f['fileName']}: {f['processingStatus']}: {f['processingError']}"
                for f in failed[:10]
            )
            raise BenchError(f"{len(failed)} file(s) failed to process: {listed}")
        completed = sum(f["processingStatus"] == "completed" for f in files)
        if completed // 100 > max(last, 0) // 100 or (completed == expected != last):
            print(f"  completed {completed}/{expected}", flush=True)
        last = completed
        if len(files) == expected and completed == expected:
            return
        time.sleep(2.0)
    raise BenchError(f"not every file was completed within {timeout:.0f}s ({last}/{expected})")


def search(
    client: httpx.Client, kb_id: int, query: str, rerank: bool | None
) -> tuple[float, list[dict[str, Any]], httpx.Response]:
    """One `POST /kb/search` (topK 50): its time (ms), results and response."""
    body: dict[str, Any] = {"kbId": kb_id, "query": query, "topK": TOP_K}
    if rerank is not None:
        body["rerank"] = rerank
    started = time.perf_counter()
    response = client.post("/kb/search", json=body)
    ms = (time.perf_counter() - started) * 1000
    return ms, expect(response, 200)["results"], response


def search_headers(response: httpx.Response) -> dict[str, str]:
    """The response's headers about the search (a reranker's, say)."""
    return {k: v for k, v in response.headers.items() if "search" in k or "rerank" in k}


def search_settings(env: dict[str, str]) -> str:
    """The service's search settings as serve reads them from `env`, when the service exposes
    them (`entrypoints.search_config.SearchSettings`), secrets left out; else nothing."""
    try:
        from entrypoints.search_config import SearchSettings

        settings = SearchSettings.from_env(env, [])
        shown = [f.name for f in dataclasses.fields(settings) if f.repr]
    except (ImportError, AttributeError, TypeError, ValueError):
        return ""
    return ", ".join(f"{name} {getattr(settings, name)}" for name in shown)


def run_service(args: argparse.Namespace, collection: Collection) -> ServiceRun:
    env = {"AP_LOG_LEVEL": args.log_level}
    if args.rerank_model:
        env["AP_RERANK_MODEL"] = args.rerank_model
    by_name = {doc.file_name: doc.id for doc in collection.docs}
    with Rig("ap-bench-retrieval-") as rig:
        platform = rig.serve(env)
        token = platform.token("u_retrieval", "admin", ORG_ID)
        client = httpx.Client(base_url=platform.url, headers=harness.bearer(token), timeout=120)
        rig.closing.append(client.close)
        kb = expect(client.post("/kb/manage", json={"name": "Cranfield"}), 201)["knowledgeBase"]
        kb_id = int(kb["id"])
        defaults = {k: kb.get(k) for k in ("embeddingModel", "chunkSize", "chunkOverlap")}
        print(f"knowledge base {kb_id}: {defaults}", flush=True)
        print(f"uploading {len(collection.docs)} files", flush=True)
        started = time.perf_counter()
        upload_all(platform, token, kb_id, collection.docs)
        upload_s = time.perf_counter() - started
        wait_completed(client, kb_id, platform, len(collection.docs), args.timeout)
        ingest_s = time.perf_counter() - started
        print(f"uploaded in {upload_s:.1f} s, all completed after {ingest_s:.1f} s", flush=True)

        print("restarting serve to time the first search after its start", flush=True)
        client.close()
        rig.stop(platform)
        started = time.perf_counter()
        # At info level: serve logs `search_models_loaded` once its embedding model is loaded.
        platform = rig.serve({**env, "AP_LOG_LEVEL": "info"})
        restart_s = time.perf_counter() - started
        loaded_s = wait_models_loaded(platform, started)
        client = httpx.Client(base_url=platform.url, headers=harness.bearer(token), timeout=120)
        rig.closing.append(client.close)
        first_ms, _, response = search(client, kb_id, collection.queries[0].text, None)
        print(
            f"serve ready in {restart_s:.1f} s, models loaded {loaded_s:.1f} s after its start; "
            f"first search {first_ms:.1f} ms",
            flush=True,
        )
        run = ServiceRun(
            defaults, len(collection.docs), upload_s, ingest_s, restart_s, loaded_s, first_ms,
            search_headers(response), settings=search_settings({**os.environ, **platform.env}),
        )  # fmt: skip

        modes: dict[str, bool | None] = (
            {SERVICE: False, RERANKED: True} if args.rerank_model else {SERVICE: None}
        )
        answers: dict[str, list[list[list[int]]]] = {m: [] for m in modes}  # pass -> query
        for label in ("warm-up", "timed"):
            got: dict[str, list[list[int]]] = {m: [] for m in modes}
            for i, query in enumerate(collection.queries):
                for mode in harness.alternate(list(modes), i):
                    ms, results, response = search(client, kb_id, query.text, modes[mode])
                    ids = [by_name[r["fileName"]] for r in results]
                    got[mode].append(ids)
                    if label == "timed":
                        run.latency.setdefault(mode, []).append(ms)
                        header = response.headers.get("x-rerank", "(none)")
                        run.rerank.setdefault(mode, Counter())[header] += 1
                        error = response.headers.get("x-rerank-error")
                        run.rerank_error = run.rerank_error or error or ""
            for mode in modes:
                answers[mode].append(got[mode])
            print(f"{label} pass done ({len(collection.queries)} queries)", flush=True)
        run.load = harness.load_average()
        for mode in modes:
            warm, timed = answers[mode]
            run.rankings[mode] = [first_places(ids) for ids in timed]
            run.distinct[mode] = [len(set(ids)) for ids in timed]
            run.passages[mode] = [len(ids) for ids in timed]
            run.unstable[mode] = sum(a != b for a, b in zip(warm, timed, strict=True))
    return run


# the baselines ----------------------------------------------------------------------------
def baseline_modules() -> None:
    """Import the baselines' packages now, so that a missing one stops the run before serve."""
    needed = {
        "rank_bm25": "rank-bm25",
        "llama_index.core": "llama-index-core",
        "llama_index.retrievers.bm25": "llama-index-retrievers-bm25",
        "sentence_transformers": "sentence-transformers",
        "numpy": "numpy",
    }
    missing = []
    for module, package in needed.items():
        try:
            __import__(module)
        except ImportError:
            missing.append(package)
    if missing:
        raise BenchError(
            f"the baselines need {', '.join(missing)}: .venv/bin/pip install "
            + " ".join(missing)
            + " (or `pip install -e '.[dev]'` once the dev extra names them)"
        )


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens less the English stop words."""
    return [w for w in WORD.findall(text.lower()) if w not in ENGLISH_STOP_WORDS]


def minilm() -> Any:
    from adapters.embeddings.local import bundled_minilm_path, load_sentence_transformer

    return load_sentence_transformer(bundled_minilm_path())


def encode(model: Any, texts: Sequence[str]) -> Any:
    return model.encode(
        list(texts), batch_size=32, normalize_embeddings=True, convert_to_numpy=True,
        show_progress_bar=False,
    )  # fmt: skip


def llama_index_fusion(docs: Sequence[Doc], vectors: Any, model: Any) -> Callable[[str], list[int]]:
    """LlamaIndex's QueryFusionRetriever (RRF, one query: no LLM) over its BM25Retriever and a
    VectorStoreIndex retriever on the MiniLM vectors (computed once, `vectors`); a query ->
    the documents, best first."""
    from llama_index.core import Settings, VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.llms import MockLLM
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.core.schema import TextNode
    from llama_index.retrievers.bm25 import BM25Retriever
    from pydantic import PrivateAttr

    class MiniLMEmbedding(BaseEmbedding):
        """all-MiniLM-L6-v2 through sentence-transformers, normalized vectors."""

        _model: Any = PrivateAttr()

        def __init__(self, st_model: Any) -> None:
            super().__init__(model_name="all-MiniLM-L6-v2", embed_batch_size=32)
            self._model = st_model

        def _get_query_embedding(self, query: str) -> list[float]:
            return list(map(float, encode(self._model, [query])[0]))

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return list(map(float, encode(self._model, [text])[0]))

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return [list(map(float, v)) for v in encode(self._model, texts)]

    embed = MiniLMEmbedding(model)
    Settings.llm = None  # MockLLM: nothing reaches OpenAI
    Settings.embed_model = embed
    nodes = [
        TextNode(id_=doc.file_name, text=doc.content, embedding=[float(x) for x in vector])
        for doc, vector in zip(docs, vectors, strict=True)
    ]
    index = VectorStoreIndex(nodes, embed_model=embed)
    retriever = QueryFusionRetriever(
        [index.as_retriever(similarity_top_k=TOP_K), BM25Retriever.from_defaults(
            nodes=nodes, similarity_top_k=TOP_K
        )],
        llm=MockLLM(),
        mode="reciprocal_rerank",  # type: ignore[arg-type]
        similarity_top_k=TOP_K,
        num_queries=1,
        use_async=False,
    )  # fmt: skip
    by_name = {doc.file_name: doc.id for doc in docs}

    def ranking(query: str) -> list[int]:
        return first_places([by_name[n.node.node_id] for n in retriever.retrieve(query)])

    return ranking


def run_baselines(collection: Collection) -> dict[str, list[list[int]]]:
    """Each baseline's ranking (document ids, best first) per query."""
    import numpy as np
    from rank_bm25 import BM25Okapi

    docs, queries = collection.docs, [q.text for q in collection.queries]
    ids = np.array([d.id for d in docs])
    print("baselines: BM25", flush=True)
    bm25 = BM25Okapi([tokenize(d.content) for d in docs], k1=BM25_K1, b=BM25_B)
    out: dict[str, list[list[int]]] = {name: [] for name in BASELINES}
    for query in queries:
        scores = bm25.get_scores(tokenize(query))
        order = np.lexsort((ids, -scores))
        out["BM25"].append([int(ids[i]) for i in order if scores[i] > 0])
    print("baselines: dense (encoding the documents)", flush=True)
    model = minilm()
    vectors = encode(model, [d.content for d in docs])
    for query_vector in encode(model, queries):
        scores = vectors @ query_vector
        out["dense"].append([int(ids[i]) for i in np.lexsort((ids, -scores))])
    out["RRF"] = [rrf(pair) for pair in zip(out["BM25"], out["dense"], strict=True)]
    print("baselines: LlamaIndex QueryFusionRetriever", flush=True)
    fusion = llama_index_fusion(docs, vectors, model)
    out["LlamaIndex fusion"] = [fusion(query) for query in queries]
    return out


# the report -------------------------------------------------------------------------------
def code_state() -> str:
    """HEAD and how many files of `src/` differ from it (others change the search meanwhile)."""
    import entrypoints

    loaded = Path(entrypoints.__file__).resolve().parents[1]
    if loaded != harness.ROOT / "src":
        return f"the service's code from {loaded} (PYTHONPATH), not this repository's src/"
    changed = harness.git("status", "--porcelain", "--", "src").splitlines()
    head = harness.git("rev-parse", "--short", "HEAD")
    return f"HEAD {head}, " + (
        f"src/ with uncommitted changes ({len(changed)} files or folders)"
        if changed
        else "src/ as committed"
    )


def clip(text: str, width: int = 90) -> str:
    return text if len(text) <= width else text[:width].rstrip() + "…"


def run(args: argparse.Namespace, info: dict[str, str]) -> tuple[str, bool]:
    began = time.perf_counter()
    baseline_modules()
    collection = load_collection(args.data, args.queries)
    code = code_state()
    service = run_service(args, collection)
    baselines = run_baselines(collection)
    rankings = {**service.rankings, **baselines}
    numbers = [q.number for q in collection.queries]
    per_query = {
        name: [score(r, collection.gains(n)) for r, n in zip(ranks, numbers, strict=True)]
        for name, ranks in rankings.items()
    }
    ndcg = {name: [s.ndcg10 for s in scores] for name, scores in per_query.items()}
    means = {
        name: {m: mean([getattr(s, m) for s in scores]) for m in METRICS}
        for name, scores in per_query.items()
    }
    comparisons = [(SERVICE, b) for b in BASELINES]
    if RERANKED in rankings:
        comparisons = [(RERANKED, SERVICE), *comparisons, *((RERANKED, b) for b in BASELINES)]
    pairs = {(a, b): paired(ndcg[a], ndcg[b], args.seed) for a, b in comparisons}
    elapsed = time.perf_counter() - began

    p50 = {m: percentile(v, 50) for m, v in service.latency.items()}
    p95 = {m: percentile(v, 95) for m, v in service.latency.items()}
    best = max(BASELINES, key=lambda b: means[b]["ndcg10"])
    service_ndcg = means[SERVICE]["ndcg10"]
    ok_floor = service_ndcg >= NDCG_TARGET
    ok_above = all(service_ndcg > means[b]["ndcg10"] for b in BASELINES)
    ok_latency = p50[SERVICE] < P50_TARGET_MS
    subset = len(collection.queries) != 225

    labels = {SERVICE: "service: `POST /kb/search`", **BASELINE_LABELS}
    if RERANKED in rankings:
        labels = {
            SERVICE: 'service: `POST /kb/search`, `"rerank": false`',
            RERANKED: 'service: `POST /kb/search`, `"rerank": true`',
            **BASELINE_LABELS,
        }
    table = [
        "| system | " + " | ".join(METRIC_HEADS) + " |",
        "|---|" + "---:|" * len(METRICS),
        *(
            f"| {label} | " + " | ".join(f"{means[name][m]:.3f}" for m in METRICS) + " |"
            for name, label in labels.items()
        ),
    ]
    short = {SERVICE: "service", RERANKED: "service + rerank"}
    paired_table = [
        "| comparison (nDCG@10) | mean difference | 95% interval | wins / ties / losses |",
        "|---|---:|---|---|",
        *(
            f"| {short.get(a, a)} - {short.get(b, b)} | {p.mean:+.3f} | "
            f"[{p.low:+.3f}, {p.high:+.3f}] | {p.wins} / {p.ties} / {p.losses} |"
            for (a, b), p in pairs.items()
        ),
    ]
    latency = [
        f"- Search latency, client wall time, sequential on one kept-alive connection after one "
        f"warm-up pass ({len(collection.queries)} queries"
        + (", the two settings alternating which goes first" if RERANKED in rankings else "")
        + "): "
        + "; ".join(f"{short[m]} p50 {p50[m]:.1f} ms, p95 {p95[m]:.1f} ms" for m in service.latency)
        + f" (load average after it {service.load})"
        + f". First search after serve's start (serve restarted on the same data dir, `/health` "
        f"answering {service.restart_s:.1f} s after its start, its embedding model loaded in the "
        f"background {service.loaded_s:.1f} s after its start; that search alone, once loaded): "
        f"{service.first_search_ms:.1f} ms.",
        "- Distinct documents among the "
        f"{TOP_K} passages answered (mean, min-max): "
        + "; ".join(
            f"{short[m]} {mean(v):.1f} ({min(v)}-{max(v)}; passages "
            f"{mean(service.passages[m]):.1f})"
            for m, v in service.distinct.items()
        )
        + f". Baselines rank documents: {TOP_K} each (BM25 fewer when fewer share a term).",
    ]
    if RERANKED in rankings:
        latency.append(
            "- `X-Rerank` answered in the timed pass: "
            + "; ".join(
                f"{short[m]}: " + ", ".join(f"{k} {n}" for k, n in sorted(c.items()))
                for m, c in service.rerank.items()
            )
            + (f" (first `X-Rerank-Error`: {service.rerank_error})" if service.rerank_error else "")
            + "."
        )
    unstable = {m: n for m, n in service.unstable.items() if n}
    if unstable:
        latency.append(
            "- Answers that differed between the warm-up and the timed pass: "
            + ", ".join(f"{short[m]} {n} queries" for m, n in unstable.items())
            + " (the timed pass is scored)."
        )
    if RERANKED in rankings and all(
        a == b for a, b in zip(rankings[SERVICE], rankings[RERANKED], strict=True)
    ):
        latency.append(
            '- `"rerank": true` answered exactly as `"rerank": false` for every query: the '
            "reranker did not change any ranking (is the field supported?)."
        )
    losses = sorted(range(len(numbers)), key=lambda i: ndcg[SERVICE][i] - ndcg[best][i])[:5]
    worst = [
        f"  - query {numbers[i]}: service {ndcg[SERVICE][i]:.2f}, {best} {ndcg[best][i]:.2f} "
        f"({len(collection.gains(numbers[i]))} relevant): "
        f'"{clip(collection.queries[i].text)}"'
        for i in losses
        if ndcg[SERVICE][i] < ndcg[best][i]
    ]
    defaults = service.defaults
    lines = [
        *harness.heading(SECTION_TITLE, "retrieval_quality.py"),
        f"- Machine: {harness.machine_line(info)}.",
        f"- Code measured: {code}.",
        f"- Collection: Cranfield, {len(collection.docs):,} documents (each a text file: the "
        f"title, a blank line, the text; {len(collection.empty)} without any text left out of "
        f"every system, {', '.join(map(str, collection.empty))}: the service refuses an empty "
        f"file, and none can be found by its text), {len(collection.queries)} of the 225 queries"
        + (" (a subset: `--queries`)" if subset else "")
        + "; graded judgements, gain 5 - code for codes 1-4; nDCG@10 with the ideal DCG from "
        "every judged relevant document; Recall and MRR count codes 1-4 as relevant.",
        "- The service: `agent-platform serve` on the embedded defaults with its worker child "
        f"(`AP_LOG_LEVEL={args.log_level}` while it ingests; searched once restarted at `info`, "
        "the default"
        + (f", `AP_RERANK_MODEL={args.rerank_model}`" if args.rerank_model else "")
        + f"); the knowledge base as created with no options: embedding model "
        f"`{defaults.get('embeddingModel')}`, chunk size {defaults.get('chunkSize')}, overlap "
        f"{defaults.get('chunkOverlap')}; `POST /kb/search` with `kbId`, `query`, `topK` {TOP_K}"
        + (', `"rerank"` false / true' if RERANKED in rankings else " and nothing else")
        + (
            "; search headers: " + ", ".join(f"`{k}: {v}`" for k, v in headers.items())
            if (headers := service.first_headers)
            else ""
        )
        + (f"; the search settings serve reads: {service.settings}" if service.settings else "")
        + f". Files uploaded over HTTP ({UPLOAD_THREADS} at a time) in {service.upload_s:.0f} s, "
        f"all `completed` {service.ingest_s:.0f} s after the first upload. A document's rank is "
        "its first passage's place.",
        "- Baselines, in process over the same documents: BM25 = rank_bm25 `BM25Okapi` (k1 "
        f"{BM25_K1}, b {BM25_B}) over lower-cased word tokens of 2+ characters (scikit-learn's "
        "default token pattern) less scikit-learn's "
        "`ENGLISH_STOP_WORDS` (318 words, copied into the script); dense = all-MiniLM-L6-v2 "
        "(the bundled folder) on the whole document (the model reads its first 256 word "
        f"pieces), cosine; RRF = reciprocal rank fusion (k {RRF_K}) of the full BM25 and dense "
        "rankings; LlamaIndex fusion = llama-index-core's `QueryFusionRetriever` (num_queries 1, "
        f"no LLM; `reciprocal_rerank`; similarity_top_k {TOP_K}) over `BM25Retriever` "
        "(llama-index-retrievers-bm25 defaults: bm25s, English stemmer and stop words) and a "
        "`VectorStoreIndex` retriever on the same MiniLM vectors, one node per document.",
        "",
        *table,
        "",
        "Paired, query by query (service first): mean nDCG@10 difference, 95% paired bootstrap "
        f"percentile interval ({BOOTSTRAP:,} resamples of the queries, seed {args.seed}), and "
        "the queries where the first is above / equal / below:",
        "",
        *paired_table,
        "",
        *latency,
    ]
    if worst:
        lines += [f"- The service's largest losses to the best baseline ({best}), nDCG@10:", *worst]
    lines += [
        f"- Run time: {elapsed / 60:.1f} minutes.",
        "",
        "| target | measured | result |",
        "|---|---:|---|",
        f"| service nDCG@10 >= {NDCG_TARGET} | {service_ndcg:.3f} | {verdict(ok_floor)} |",
        f"| service nDCG@10 above every baseline (best: {best} {means[best]['ndcg10']:.3f}) | "
        f"{service_ndcg - means[best]['ndcg10']:+.3f} | {verdict(ok_above)} |",
        f"| search p50 < {P50_TARGET_MS:.0f} ms | {p50[SERVICE]:.1f} ms | {verdict(ok_latency)} |",
    ]
    if RERANKED in rankings:
        lines.append('\nThe targets are judged on the service with `"rerank": false`.')
    if subset:
        lines.append(f"\n(A subset of {len(collection.queries)} queries: not comparable.)")
    return "\n".join(lines) + "\n", ok_floor and ok_above and ok_latency


def main() -> int:
    parser = harness.parser(__doc__, serve=True)
    parser.set_defaults(log_level="warning")
    parser.add_argument("--seed", type=int, default=20240601, help="the bootstrap's seed")
    parser.add_argument("--queries", type=int, default=0, help="the first N queries (0: all)")
    parser.add_argument(
        "--rerank-model", default="", metavar="PATH_OR_URL", help="AP_RERANK_MODEL for serve"
    )
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="the Cranfield folder")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to process")
    args = parser.parse_args()
    if args.queries < 0 or args.queries > 225:
        parser.error("--queries must be 0 to 225")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return harness.run(SECTION_TITLE, args, run)


if __name__ == "__main__":
    sys.exit(main())
