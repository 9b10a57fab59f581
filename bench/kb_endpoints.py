"""The knowledge-base list endpoints at size under wrk, in the real service and in a bare
Litestar + asyncpg + msgspec app (`bare_app.py`) running the same SQL on the same database.

    .venv/bin/python bench/kb_endpoints.py [--rounds 3] [--duration 10] [--connections 32]

What it measures, how, its targets and options: bench/README.md.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import harness
import httpx
from harness import BenchError, Rounds, bearer, expect, verdict

SECTION_TITLE = "KB list endpoints: full service vs bare Litestar + asyncpg"
ORG_ID = harness.ORG_ID
SMALL_ORG_ID = "org_small"
KB_COUNT = 1_000
SMALL_KB_COUNT = 50
FILE_COUNT = 500
BIG_FILE_COUNT = 10_000
PAGE = 100
DEEP_PAGE_AFTER = 5_000
TARGET = 0.85
LATENCY_TARGETS_MS = {"page": 10.0, "page_deep": 10.0, "manage": 20.0}
ENDPOINTS = {
    "files": f"GET /kb/files?kbId=… ({FILE_COUNT} files, whole)",
    "page": f"GET /kb/files?kbId=…&limit={PAGE} (first page of {BIG_FILE_COUNT:,})",
    "page_deep": (
        f"GET /kb/files?kbId=…&limit={PAGE}&cursor=… (after {DEEP_PAGE_AFTER:,} of "
        f"{BIG_FILE_COUNT:,})"
    ),
    "manage": f"GET /kb/manage ({KB_COUNT:,} knowledge bases)",
    "manage_small": f"GET /kb/manage ({SMALL_KB_COUNT} knowledge bases)",
}
SERVERS = ("full", "bare")
FIGURES = ("rps", "p50_ms", "p99_ms")


def start_serve(rig: harness.Rig) -> harness.Platform:
    """serve with JSON logs, as deployed, and without its worker: the files stay as seeded, as
    both servers must list them."""
    return rig.serve({"AP_LOG_FORMAT": "json"}, worker=False)


def ratio(loaded: Rounds, endpoint: str) -> float:
    return loaded.median((endpoint, "full"), "rps") / loaded.median((endpoint, "bare"), "rps")


BULK_FILES = """
    INSERT INTO knowledge_base_files (org_id, knowledge_base_id, file_id, file_name, file_key,
        content_key, content_type, file_size, processing_status, created_at, updated_at)
    SELECT $1::text, $2::bigint, g.u, format('scan-%s.pdf', g.i),
           format('orgs/%s/files/%s/scan-%s.pdf', $1::text, g.u, g.i),
           format('orgs/%s/files/%s/content.md', $1::text, g.u), 'application/pdf',
           20000 + g.i, 'completed', now() - make_interval(secs => g.i),
           now() - make_interval(secs => g.i)
    FROM (SELECT i, gen_random_uuid() AS u FROM generate_series(1, $3::int) i) g"""


def seed(base_url: str, tokens: dict[str, str], pgdata: Path) -> tuple[int, int]:
    """1,000 knowledge bases in `ORG_ID`, 500 files uploaded into the first and 10,000 file
    records in the second (one statement as the owner: over HTTP it would take minutes; the
    roll-up trigger keeps the totals as for any other insert); 50 knowledge bases in
    `SMALL_ORG_ID`. The two knowledge bases' ids. Then fresh planner statistics, so that the
    first round does not run with the plans chosen for empty tables."""
    for org, count in ((ORG_ID, KB_COUNT), (SMALL_ORG_ID, SMALL_KB_COUNT)):
        with httpx.Client(base_url=base_url, headers=bearer(tokens[org]), timeout=30.0) as client:
            made = [
                client.post("/kb/manage", json={"name": f"Bench KB {i:04d}"}) for i in range(count)
            ]
            kb_ids = [int(expect(r, 201)["knowledgeBase"]["id"]) for r in made]
            if org == ORG_ID:
                files_kb, big_kb = kb_ids[0], kb_ids[1]
                for i in range(FILE_COUNT):
                    name, size = f"report-{i:03d}.pdf", 10_000 + i
                    harness.upload_file(client, files_kb, name, "application/pdf", bytes(size))
    harness.owner_execute(pgdata, BULK_FILES, ORG_ID, big_kb, BIG_FILE_COUNT)
    harness.owner_execute(
        pgdata, "VACUUM ANALYZE knowledge_bases, knowledge_base_files, knowledge_base_stats"
    )
    return files_kb, big_kb


def deep_cursor(base_url: str, token: str, kb_id: int) -> str:
    """The service's own cursor after the first `DEEP_PAGE_AFTER` files."""
    cursor = ""
    for _ in range(DEEP_PAGE_AFTER // 1000):
        params = {"kbId": str(kb_id), "limit": "1000", **({"cursor": cursor} if cursor else {})}
        response = httpx.get(f"{base_url}/kb/files", params=params, headers=bearer(token))
        cursor = expect(response, 200)["nextCursor"]
    return cursor


def first_difference(a: Any, b: Any, path: str = "$") -> str | None:
    """Where two JSON values first differ (dict keys in sorted order), or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        pairs = [(f"{path}.{k}", a.get(k), b.get(k)) for k in sorted(a.keys() | b.keys())]
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        pairs = [(f"{path}[{i}]", x, y) for i, (x, y) in enumerate(zip(a, b, strict=True))]
    else:
        return None if a == b else f"{path}: {a!r} != {b!r}"
    return next((found for p, x, y in pairs if (found := first_difference(x, y, p))), None)


EXPECTED_ITEMS = {
    "files": FILE_COUNT,
    "page": PAGE,
    "page_deep": PAGE,
    "manage": KB_COUNT,
    "manage_small": SMALL_KB_COUNT,
}


def check_same_bodies(urls: dict[str, dict[str, str]], tokens: dict[str, str]) -> dict[str, int]:
    """Both servers return the same JSON for every endpoint; returns the full bodies' sizes."""
    sizes = {}
    for endpoint in ENDPOINTS:
        full = httpx.get(urls["full"][endpoint], headers=bearer(tokens[endpoint]))
        full_body, bare_body = expect(full, 200), expect(httpx.get(urls["bare"][endpoint]), 200)
        items = full_body.get("files", full_body.get("knowledgeBases"))
        wanted = EXPECTED_ITEMS[endpoint]
        if not isinstance(items, list) or len(items) != wanted:
            raise BenchError(f"{endpoint}: expected {wanted} items in {urls['full'][endpoint]}")
        difference = first_difference(full_body, bare_body)
        if difference:
            raise BenchError(f"{endpoint}: bodies differ (service, bare) at {difference}")
        sizes[endpoint] = len(full.content)
    return sizes


def measure(
    urls: dict[str, dict[str, str]], tokens: dict[str, str], args: argparse.Namespace
) -> tuple[Rounds, Rounds]:
    """Throughput at `--connections`, then one-client latency, per round; both servers in
    turn, their order alternating between rounds. Keyed (endpoint, server)."""

    def wrk(endpoint: str, server: str, duration: float, clients: int = 0) -> harness.Measurement:
        token = tokens[endpoint] if server == "full" else None
        threads, connections = (1, 1) if clients == 1 else (args.threads, args.connections)
        return harness.wrk(urls[server][endpoint], token, threads, connections, duration)

    for endpoint in ENDPOINTS:
        for server in SERVERS:
            print(f"warm-up  {endpoint:12} {server} ({args.warmup:g}s)", flush=True)
            wrk(endpoint, server, args.warmup)
    loaded, alone = Rounds(), Rounds()
    for r in range(args.rounds):
        order = harness.alternate(SERVERS, r)
        for endpoint in ENDPOINTS:
            for server in order:
                m = wrk(endpoint, server, args.duration)
                loaded.add((endpoint, server), m)
                print(f"round {r + 1}  {endpoint:12} {server}  {m.line()}", flush=True)
        for endpoint in LATENCY_TARGETS_MS:
            for server in order:
                m = wrk(endpoint, server, args.latency_duration, clients=1)
                alone.add((endpoint, server), m)
                print(
                    f"round {r + 1}  {endpoint:12} {server}  one client: p50 {m.p50_ms:6.2f} ms"
                    f"  p99 {m.p99_ms:6.2f} ms",
                    flush=True,
                )
    return loaded, alone


def table(loaded: Rounds, alone: Rounds, connections: int) -> list[str]:
    rows = [
        f"Throughput, {connections} connections:",
        "",
        "| Endpoint | Server | req/s | p50 (ms) | p99 (ms) |",
        "|---|---|---:|---:|---:|",
    ]
    for endpoint, label in ENDPOINTS.items():
        for server in SERVERS:
            rps, p50, p99 = (loaded.median((endpoint, server), x) for x in FIGURES)
            rows.append(f"| {label} | {server} | {rps:.0f} | {p50:.2f} | {p99:.2f} |")
    rows += ["", "| Endpoint | full / bare req/s | Target | Result |", "|---|---:|---:|---|"]
    for endpoint, label in ENDPOINTS.items():
        full = ratio(loaded, endpoint)
        rows.append(f"| {label} | {full:.0%} | ≥ {TARGET:.0%} | {verdict(full >= TARGET)} |")
    rows += [
        "",
        "One client (`-t1 -c1`), latency as wrk measures it (loopback, request sent to response "
        "read):",
        "",
        "| Endpoint | full p50 (ms) | full p99 (ms) | bare p50 (ms) | Target (full p50) | Result |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for endpoint, target in LATENCY_TARGETS_MS.items():
        p50 = alone.median((endpoint, "full"), "p50_ms")
        rows.append(
            f"| {ENDPOINTS[endpoint]} | {p50:.2f} | "
            f"{alone.median((endpoint, 'full'), 'p99_ms'):.2f} | "
            f"{alone.median((endpoint, 'bare'), 'p50_ms'):.2f} | < {target:g} ms | "
            f"{verdict(p50 < target)} |"
        )
    return rows


def rounds_table(loaded: Rounds, alone: Rounds) -> list[str]:
    rows = ["| Endpoint | Server | req/s per round | p50 (ms) per round | p99 (ms) per round |"]
    rows.append("|---|---|---|---|---|")
    parts = ((loaded, ENDPOINTS, ""), (alone, LATENCY_TARGETS_MS, ", one client"))
    for results, endpoints, suffix in parts:
        for endpoint in endpoints:
            for server in SERVERS:
                rps, p50, p99 = (results.values((endpoint, server), x) for x in FIGURES)
                rows.append(
                    f"| {endpoint}{suffix} | {server} | {harness.fmt(rps, 0)} | "
                    f"{harness.fmt(p50)} | {harness.fmt(p99)} |"
                )
    errors = [
        f"{endpoint}/{server} round {i + 1}: {m.errors}"
        for results in (loaded, alone)
        for (endpoint, server), ms in results.rounds.items()
        for i, m in enumerate(ms)
        if m.errors
    ]
    if errors:
        rows += ["", "Socket errors reported by wrk: " + "; ".join(errors) + "."]
    return rows


def section(
    loaded: Rounds,
    alone: Rounds,
    args: argparse.Namespace,
    info: dict[str, str],
    sizes: dict[str, int],
) -> str:
    body_sizes = ", ".join(f"{e} {sizes[e] / 1024:.0f} KiB" for e in ENDPOINTS)
    lines = [
        *harness.heading(SECTION_TITLE, "kb_endpoints.py"),
        f"- Machine: {harness.machine_line(info)}. The servers, PostgreSQL and wrk share these "
        "CPUs.",
        f"- Load: {info['wrk']}, `-t{args.threads} -c{args.connections} -d{args.duration:g}s` "
        f"over loopback, one server at a time; a {args.warmup:g}s warm-up per target, then "
        f"{args.rounds} interleaved rounds, each also timing one client (`-t1 -c1 "
        f"-d{args.latency_duration:g}s`) on the endpoints with a latency target; the figures "
        "are the medians over the rounds.",
        f"- Data: organization `{ORG_ID}` with {KB_COUNT:,} knowledge bases, {FILE_COUNT} files "
        f"uploaded over HTTP into one of them and {BIG_FILE_COUNT:,} file records inserted as the "
        "owner into another (one statement; the trigger keeps the totals as for any insert); "
        f"organization `{SMALL_ORG_ID}` with {SMALL_KB_COUNT} knowledge bases. serve runs without "
        "its worker child (`AP_WORKER_IN_PROCESS=false`), so nothing changes a file between the "
        f"two servers' reads. Response bodies: {body_sizes}; identical on both servers.",
        "- full: `agent-platform serve` on embedded PostgreSQL 18 (one uvicorn worker, litestar "
        f"{version('litestar')}, dishka {version('dishka')}, asyncpg {version('asyncpg')}) with "
        "`AP_LOG_FORMAT=json` as deployed: bearer JWT check (verified tokens cached up to a "
        "minute), request-scoped container, just-in-time member record (cached), an "
        "organization-scoped connection from a fair gate in front of a pool of 20 (app role, "
        "session-level `set_config('app.org_id')` on checkout, row-level security), an access-log "
        "line and the metrics middleware. Per request it sends the scope (with the member's "
        "removal check) and the SELECT(s): 3 statements for files (knowledge-base lookup, then the "
        "listing or page), 2 for manage (totals read from `knowledge_base_stats`); reads run "
        "without a transaction, and the connection goes back to the pool without a reset.",
        "- bare: `bench/bare_app.py` (one uvicorn worker): Litestar handler, one asyncpg pool as "
        "the superuser, the same SELECTs with `org_id` in the WHERE clause (files: the "
        "knowledge-base lookup, then the listing or page; manage: one), then asyncpg's reset "
        "as the connection goes back to the pool: 3 statements for files, 2 for manage, as "
        "the service; each response struct built from its record by column name, msgspec "
        "encoding; no transaction, no row-level security, no auth, no DI, no log.",
        "",
        *table(loaded, alone, args.connections),
        "",
        "Per round:",
        "",
        *rounds_table(loaded, alone),
        "",
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace, info: dict[str, str]) -> tuple[str, bool]:
    with harness.Rig("ap-bench-") as rig:
        platform = start_serve(rig)
        org_tokens = {org: platform.token("u1", "admin", org) for org in (ORG_ID, SMALL_ORG_ID)}
        print(
            f"seeding {KB_COUNT:,} + {SMALL_KB_COUNT} knowledge bases, {FILE_COUNT} files "
            f"over HTTP and {BIG_FILE_COUNT:,} file records"
        )
        files_kb, big_kb = seed(platform.url, org_tokens, platform.pgdata)
        cursor = deep_cursor(platform.url, org_tokens[ORG_ID], big_kb)
        bare_port = harness.free_port()
        print(f"starting bench/bare_app.py on :{bare_port}")
        bare_env = {"BENCH_PG_HOST": str(platform.pgdata), "BENCH_ORG_ID": ORG_ID}
        cmd = [sys.executable, str(harness.BENCH_DIR / "bare_app.py"), "--port", str(bare_port)]
        harness.wait_ready(rig.start("bare", cmd, bare_env), bare_port, "/kb/manage")
        paths = {
            "files": f"/kb/files?kbId={files_kb}",
            "page": f"/kb/files?kbId={big_kb}&limit={PAGE}",
            "page_deep": f"/kb/files?kbId={big_kb}&limit={PAGE}&cursor={cursor}",
            "manage": "/kb/manage",
            "manage_small": "/kb/manage",
        }
        bare_paths = {**paths, "manage_small": f"/kb/manage?org={SMALL_ORG_ID}"}
        urls = {
            "full": {e: platform.url + p for e, p in paths.items()},
            "bare": {e: f"http://127.0.0.1:{bare_port}{p}" for e, p in bare_paths.items()},
        }
        tokens = {e: org_tokens[ORG_ID] for e in ENDPOINTS}
        tokens["manage_small"] = org_tokens[SMALL_ORG_ID]
        sizes = check_same_bodies(urls, tokens)
        loaded, alone = measure(urls, tokens, args)
    ok = all(ratio(loaded, e) >= TARGET for e in ENDPOINTS) and all(
        alone.median((e, "full"), "p50_ms") < target for e, target in LATENCY_TARGETS_MS.items()
    )
    return section(loaded, alone, args, info, sizes), ok


def main() -> int:
    parser = harness.parser(__doc__, rounds=3, duration=10.0, warmup=5.0)
    parser.add_argument("--latency-duration", type=float, default=5.0, help="one-client runs (s)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--connections", type=int, default=32)
    return harness.run(SECTION_TITLE, parser.parse_args(), run, wrk=True)


if __name__ == "__main__":
    sys.exit(main())
